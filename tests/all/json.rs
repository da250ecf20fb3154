//! The `--json` contract (docs/json.md): every command's JSON Lines, parsed into strict structs
//! (`deny_unknown_fields`, every field named), one enum over `type`, and the summaries one enum
//! over `command`. A field added, removed or renamed without these structs and docs/json.md
//! fails here; so does a doc section that misses a field of its struct.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde::de::{DeserializeOwned, Visitor};
use serde::Deserialize;
use serde_json::Value;

type Object = serde_json::Map<String, Value>;

// ---------------------------------------------------------------------------------------------
// The schema

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(dead_code)]
enum Line {
    Message(Message),
    Unit(Unit),
    IndexHeader(IndexHeader),
    IndexEntry(IndexEntry),
    Checkpoint(Checkpoint),
    Config(Config),
    Finding(Finding),
    Recovery(Recovery),
    Info(Info),
    Group(Group),
    DelayLevel(DelayLevel),
    Transaction(Transaction),
    Pull(Pull),
    Action(Action),
    QueueOffset(QueueOffset),
    OffsetChange(OffsetChange),
    ConfigEntry(ConfigEntry),
    ConfigChange(ConfigChange),
    Trace(Trace),
    TimerUnit(TimerUnit),
    TimerSlot(TimerSlot),
    Timercheck(Timercheck),
    Timers(Timers),
    DledgerInfo(DledgerInfo),
    DledgerEntry(DledgerEntry),
    DledgerIndex(DledgerIndex),
    CompareRecord(CompareRecord),
    CompareStore(CompareStore),
    ConfigDifference(ConfigDifference),
    Send(SendLine),
    SendPlan(SendPlan),
    Note(Note),
    Error(ErrorLine),
    Summary(Summary),
}

impl Line {
    fn kind(&self) -> &'static str {
        match self {
            Line::Message(_) => "message",
            Line::Unit(_) => "unit",
            Line::IndexHeader(_) => "index_header",
            Line::IndexEntry(_) => "index_entry",
            Line::Checkpoint(_) => "checkpoint",
            Line::Config(_) => "config",
            Line::Finding(_) => "finding",
            Line::Recovery(_) => "recovery",
            Line::Info(_) => "info",
            Line::Group(_) => "group",
            Line::DelayLevel(_) => "delay_level",
            Line::Transaction(_) => "transaction",
            Line::Pull(_) => "pull",
            Line::Action(_) => "action",
            Line::QueueOffset(_) => "queue_offset",
            Line::OffsetChange(_) => "offset_change",
            Line::ConfigEntry(_) => "config_entry",
            Line::ConfigChange(_) => "config_change",
            Line::Trace(_) => "trace",
            Line::TimerUnit(_) => "timer_unit",
            Line::TimerSlot(_) => "timer_slot",
            Line::Timercheck(_) => "timercheck",
            Line::Timers(_) => "timers",
            Line::DledgerInfo(_) => "dledger_info",
            Line::DledgerEntry(_) => "dledger_entry",
            Line::DledgerIndex(_) => "dledger_index",
            Line::CompareRecord(_) => "compare_record",
            Line::CompareStore(_) => "compare_store",
            Line::ConfigDifference(_) => "config_difference",
            Line::Send(_) => "send",
            Line::SendPlan(_) => "send_plan",
            Line::Note(_) => "note",
            Line::Error(_) => "error",
            Line::Summary(_) => "summary",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Message {
    file: String,
    commitlog_offset: u64,
    size: i32,
    version: u8,
    body_crc: i32,
    queue_id: i32,
    flag: i32,
    queue_offset: i64,
    sys_flag: i32,
    born_timestamp: i64,
    born_host: String,
    store_timestamp: i64,
    store_host: String,
    reconsume_times: i32,
    prepared_transaction_offset: i64,
    topic: String,
    properties: Object,
    tags: Option<String>,
    keys: Vec<String>,
    uniq_key: Option<String>,
    msg_id: String,
    body_len: u64,
    body: Option<String>,
    body_encoding: String,
    body_decompressed_from: Option<String>,
    #[serde(default)]
    body_error: Option<String>,
    // dump commitlog of a DLedger-mode store only
    #[serde(default)]
    dledger_index: Option<i64>,
    #[serde(default)]
    dledger_term: Option<i64>,
    #[serde(default)]
    dledger_pos: Option<i64>,
    #[serde(default)]
    dledger_committed: Option<bool>,
    // export only
    #[serde(default)]
    export_source: Option<String>,
    #[serde(default)]
    resend_topic: Option<String>,
    #[serde(default)]
    resend_queue_id: Option<i32>,
    #[serde(default)]
    origin_message_id: Option<String>,
    #[serde(default)]
    due_timestamp: Option<i64>,
    #[serde(default)]
    transaction_state: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Unit {
    topic: String,
    queue_id: i32,
    queue_offset: u64,
    commitlog_offset: i64,
    size: i32,
    tags_code: i64,
    pre_blank: bool,
    ext_address: bool,
    stale: bool,
    file: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct IndexHeader {
    file: String,
    size: u64,
    header: IndexHeaderFields,
    entries: i64,
    geometry: Option<IndexGeometry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct IndexHeaderFields {
    begin_timestamp: i64,
    end_timestamp: i64,
    begin_commitlog_offset: i64,
    end_commitlog_offset: i64,
    hash_slot_count: i32,
    index_count: i32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct IndexGeometry {
    slots: u32,
    entries: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct IndexEntry {
    file: String,
    entry: u32,
    slot: u32,
    key_hash: i32,
    commitlog_offset: i64,
    time_diff: i32,
    store_timestamp: i64,
    prev: i32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Checkpoint {
    file: String,
    size: u64,
    physic_msg_timestamp: i64,
    logics_msg_timestamp: i64,
    index_msg_timestamp: i64,
    master_flushed_offset: i64,
    confirm_commitlog_offset: i64,
    min_timestamp: i64,
    min_timestamp_index: i64,
}

/// The checkpoint as it is nested in `info` and `recovery`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CheckpointFields {
    physic_msg_timestamp: i64,
    logics_msg_timestamp: i64,
    index_msg_timestamp: i64,
    master_flushed_offset: i64,
    confirm_commitlog_offset: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Config {
    name: String,
    file: String,
    source: String,
    reason: Option<String>,
    content: Value,
}

/// A line for people on stderr (with `--json`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Note {
    message: String,
}

/// The error that ended a run (exit 2), on stderr (with `--json`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ErrorLine {
    message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Finding {
    severity: String,
    code: String,
    file: String,
    file_offset: u64,
    location: Location,
    message: String,
    broker_action: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[allow(dead_code)]
enum Location {
    Commitlog {
        commitlog_offset: u64,
    },
    QueueUnit {
        topic: String,
        queue_id: i32,
        queue_offset: u64,
    },
    IndexSlot {
        slot: u64,
    },
    IndexEntry {
        entry: u64,
    },
    File,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Recovery {
    version: VersionGuess,
    mode: String,
    abort_present: bool,
    abort_pid: Option<u32>,
    checkpoint: Option<CheckpointFields>,
    checkpoint_min_timestamp: Option<i64>,
    refuses_to_start: Vec<String>,
    max_commitlog_offset_of_consume_queue: u64,
    start_file: Option<FileRef>,
    start_reason: String,
    cut: Option<RecoveryCut>,
    deleted_files: Vec<DeletedFile>,
    queue_truncations: Vec<QueueTruncation>,
    requeues: Vec<Requeue>,
    redispatch_from: u64,
    redispatch_to: u64,
    redispatched_messages: u64,
    index_files_deleted: Vec<IndexDrop>,
    index_records_lost: u64,
    crc_checked: bool,
    notes: Vec<String>,
    dledger: Option<DledgerRecovery>,
}

/// `recovery.dledger`: what a DLedger-mode store's next start does.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DledgerRecovery {
    ledger_begin_index: Option<i64>,
    ledger_end_index: Option<i64>,
    ledger_end_term: Option<i64>,
    data_cut_pos: u64,
    index_cut_pos: u64,
    checkpoint_committed_index: Option<i64>,
    committed_index_at_load: Option<i64>,
    committed_pos_at_load: Option<u64>,
    commit_rule: String,
    committed_index_after_start: Option<i64>,
    served_end: u64,
    dispatch_from: u64,
    notes: Vec<String>,
    index_records_lost: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct VersionGuess {
    version: String,
    from_evidence: bool,
    evidence: Vec<String>,
    assumption: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct FileRef {
    path: String,
    start: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RecoveryCut {
    commitlog_offset: u64,
    file: String,
    file_offset: u64,
    reason: String,
    messages_dropped: u64,
    bytes_dropped: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DeletedFile {
    path: String,
    start: u64,
    messages: u64,
    bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct QueueTruncation {
    topic: String,
    queue_id: i32,
    from_queue_offset: u64,
    units: u64,
    deleted_files: Vec<String>,
}

/// `recovery.requeues[]`: a queue the next start leaves with units at other offsets than their
/// messages', units that are no message, or messages served nowhere.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Requeue {
    topic: String,
    queue_id: i32,
    recovered_end: u64,
    misplaced: u64,
    first_misplaced: Option<(u64, u64)>,
    out_of_service: u64,
    bogus_units: Vec<u64>,
    stale_units: u64,
    max_offset: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct IndexDrop {
    path: String,
    entries: u64,
    begin_commitlog_offset: i64,
    end_commitlog_offset: i64,
    end_timestamp: i64,
}

/// The geometry in force, each value with where it came from.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Geometry {
    commitlog_file_size: Sourced<u64>,
    cq_file_units: Sourced<u64>,
    index_slots: Sourced<u32>,
    index_entries: Sourced<u32>,
    delay_levels: Sourced<Vec<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Sourced<T> {
    value: T,
    source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Info {
    store: String,
    geometry: Geometry,
    commitlog: InfoCommitlog,
    topics: Vec<InfoTopic>,
    consumer_groups: Vec<InfoGroup>,
    index_files: Vec<InfoIndexFile>,
    checkpoint: Option<CheckpointFields>,
    clean_shutdown: bool,
    notes: Vec<String>,
    needs_verify: Vec<String>,
    group_lag: Vec<InfoGroupLag>,
    delayed: Vec<InfoDelayLevel>,
    retry_dlq: Vec<InfoRetryDlq>,
    transactions: InfoTransactions,
    timers: Option<TimerCounts>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoCommitlog {
    files: Vec<InfoFile>,
    min_offset: u64,
    max_offset: u64,
    message_versions: Vec<u8>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoFile {
    name: String,
    start: u64,
    size: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoTopic {
    topic: String,
    system: bool,
    queues: Vec<InfoQueue>,
    messages: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoQueue {
    queue_id: i32,
    min_offset: u64,
    max_offset: u64,
    files: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoGroup {
    group: String,
    topic: String,
    queues: Vec<InfoGroupQueue>,
    lag: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoGroupQueue {
    queue_id: i32,
    committed_offset: i64,
    max_offset: u64,
    lag: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoIndexFile {
    name: String,
    size: u64,
    entries: i64,
    begin_timestamp: i64,
    end_timestamp: i64,
    begin_commitlog_offset: i64,
    end_commitlog_offset: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoGroupLag {
    group: String,
    topics: usize,
    lag: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoDelayLevel {
    level: i32,
    delay_ms: Option<i64>,
    queue_id: i32,
    delay_offset: Option<i64>,
    min_offset: u64,
    max_offset: u64,
    pending: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoRetryDlq {
    group: String,
    retry_messages: u64,
    dlq_messages: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoTransactions {
    half_messages: u64,
    op_messages: u64,
    with_outcome: u64,
    without_outcome: u64,
    transactions_without_outcome: u64,
    without_outcome_offsets: Vec<(i32, u64)>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Group {
    group: String,
    queues: Vec<GroupQueue>,
    lag: i64,
    retries_waiting: Vec<DelayedMessage>,
    dlq_topic: String,
    dlq_messages: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct GroupQueue {
    topic: String,
    queue_id: i32,
    committed_offset: i64,
    min_offset: i64,
    max_offset: i64,
    lag: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DelayedMessage {
    level: i32,
    queue_offset: i64,
    commitlog_offset: i64,
    due_timestamp: i64,
    real_topic: Option<String>,
    real_queue_id: Option<i32>,
    uniq_key: Option<String>,
    store_timestamp: i64,
    is_retry: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DelayLevel {
    level: i32,
    delay_ms: Option<i64>,
    delay_offset: i64,
    max_offset: i64,
    pending: usize,
    due_now: usize,
    next_due_timestamp: Option<i64>,
    last_due_timestamp: Option<i64>,
    messages: Vec<DelayedMessage>,
    not_listed: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Transaction {
    uniq_key: Option<String>,
    live: HalfRecord,
    copies: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct HalfRecord {
    queue_id: i32,
    queue_offset: i64,
    commitlog_offset: i64,
    store_timestamp: i64,
    born_timestamp: i64,
    uniq_key: Option<String>,
    producer_group: Option<String>,
    real_topic: Option<String>,
    real_queue_id: Option<i32>,
    check_times: Option<i32>,
    prepared_queue_offset: Option<i64>,
    state: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Pull {
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    status: String,
    next_begin_offset: i64,
    min_offset: i64,
    max_offset: i64,
    messages: u64,
    client_filtered: u64,
    committed_offset: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Action {
    problem: String,
    action: String,
    messages: u64,
    bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Trace {
    msg_id: String,
    topic: Option<String>,
    tags: Option<String>,
    keys: Vec<String>,
    stored: Option<TraceStored>,
    sent: Vec<TraceSent>,
    consumed: Vec<TraceConsumed>,
    end_transaction: Vec<TraceEndTransaction>,
    records: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TraceStored {
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    commitlog_offset: u64,
    store_timestamp: i64,
    store_host: String,
    offset_msg_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TraceSent {
    producer_group: String,
    client_host: String,
    send_timestamp: i64,
    cost_ms: i32,
    success: bool,
    topic: String,
    store_host: String,
    offset_msg_id: Option<String>,
    msg_type: String,
    body_length: i32,
    region_id: String,
    trace_commitlog_offset: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TraceConsumed {
    group: Option<String>,
    client_host: String,
    request_id: String,
    begin_timestamp: Option<i64>,
    retry_times: Option<i32>,
    cost_ms: Option<i32>,
    success: Option<bool>,
    context_code: Option<i32>,
    consume_return: Option<String>,
    trace_commitlog_offsets: Vec<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TraceEndTransaction {
    producer_group: String,
    client_host: String,
    end_timestamp: i64,
    transaction_id: String,
    transaction_state: String,
    from_transaction_check: bool,
    store_host: String,
    msg_type: String,
    trace_commitlog_offset: u64,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "command")]
#[allow(clippy::large_enum_variant, dead_code)]
enum Summary {
    #[serde(rename = "verify")]
    Verify(VerifySummary),
    #[serde(rename = "verify --explain-recovery")]
    ExplainRecovery(ExplainRecoverySummary),
    #[serde(rename = "info")]
    Info(InfoSummary),
    #[serde(rename = "dump commitlog")]
    DumpCommitlog(DumpCommitlogSummary),
    #[serde(rename = "dump consumequeue")]
    DumpConsumequeue(DumpConsumequeueSummary),
    #[serde(rename = "dump index")]
    DumpIndex(DumpIndexSummary),
    #[serde(rename = "dump checkpoint")]
    DumpCheckpoint(DumpCheckpointSummary),
    #[serde(rename = "dump config")]
    DumpConfig(DumpConfigSummary),
    #[serde(rename = "query")]
    Query(QuerySummary),
    #[serde(rename = "pull")]
    Pull(PullSummary),
    #[serde(rename = "pending")]
    Pending(PendingSummary),
    #[serde(rename = "rebuild")]
    Rebuild(RebuildSummary),
    #[serde(rename = "repair")]
    Repair(RepairSummary),
    #[serde(rename = "export")]
    Export(ExportSummary),
    #[serde(rename = "replay")]
    Replay(ReplaySummary),
    #[serde(rename = "gen")]
    Gen(GenSummary),
    #[serde(rename = "offsets")]
    Offsets(OffsetsSummary),
    #[serde(rename = "config")]
    Config(ConfigSummary),
    #[serde(rename = "trace")]
    Trace(TraceSummary),
    #[serde(rename = "dump timerlog")]
    DumpTimerlog(DumpTimerlogSummary),
    #[serde(rename = "dump timerwheel")]
    DumpTimerwheel(DumpTimerwheelSummary),
    #[serde(rename = "dump timercheck")]
    DumpTimercheck(DumpCheckpointSummary),
    #[serde(rename = "dump dledger")]
    DumpDledger(DumpDledgerSummary),
    #[serde(rename = "compare")]
    Compare(CompareSummary),
    #[serde(rename = "send")]
    Send(SendSummary),
}

// compare

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CompareRecord {
    kind: String,
    store: usize,
    held_by: Vec<usize>,
    missing_from: Vec<usize>,
    commitlog_offset: u64,
    size: i32,
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    store_timestamp: i64,
    msg_id: String,
    uniq_key: Option<String>,
    keys: Vec<String>,
    tags: Option<String>,
    unconsumed_by: Vec<String>,
    dledger_index: Option<i64>,
    dledger_term: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CompareStore {
    store: usize,
    root: String,
    mode: String,
    role: String,
    min_commitlog_offset: Option<u64>,
    max_commitlog_offset: Option<u64>,
    records: u64,
    bytes: u64,
    first_store_timestamp: Option<i64>,
    last_store_timestamp: Option<i64>,
    file_size: Option<u64>,
    stopped: Option<String>,
    cluster: Option<BrokerSignal>,
    broker_name: Option<BrokerSignal>,
    only: CompareTally,
    before_keeper: Option<CompareTally>,
    dledger: Option<CompareReplica>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct BrokerSignal {
    value: String,
    source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CompareTally {
    records: u64,
    bytes: u64,
    min_commitlog_offset: Option<u64>,
    max_commitlog_offset: Option<u64>,
    min_store_timestamp: Option<i64>,
    max_store_timestamp: Option<i64>,
    queues: Vec<CompareQueue>,
    unconsumed: Vec<CompareGroup>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CompareQueue {
    topic: String,
    queue_id: i32,
    records: u64,
    bytes: u64,
    min_queue_offset: i64,
    max_queue_offset: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CompareGroup {
    group: String,
    records: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CompareReplica {
    self_id: String,
    current_term: Option<i64>,
    vote_leader: Option<String>,
    ledger_begin_index: Option<i64>,
    ledger_end_index: Option<i64>,
    ledger_end_term: Option<i64>,
    committed_index: Option<i64>,
    entries: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ConfigDifference {
    store: usize,
    against: usize,
    file: String,
    name: String,
    queue_id: Option<i32>,
    store_value: Option<String>,
    against_value: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CompareSummary {
    mode: String,
    stores: usize,
    keeper: usize,
    keeper_reason: String,
    divergences: Vec<CompareDivergence>,
    truncations: Vec<CompareTruncation>,
    config_differences: usize,
    lost_records: u64,
    lost_bytes: u64,
    #[serde(default)]
    below_divide: Option<CompareBelowDivide>,
    export: Option<CompareExport>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CompareBelowDivide {
    keeper: usize,
    keeper_reason: String,
    stores: Vec<CompareStore>,
    divergences: Vec<CompareDivergence>,
    lost_records: u64,
    lost_bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CompareDivergence {
    store: usize,
    against: usize,
    commitlog_offset: Option<u64>,
    index: Option<i64>,
    kind: String,
    field: Option<String>,
    common_records: u64,
    common_bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CompareTruncation {
    store: usize,
    leader: usize,
    keeps_to_index: Option<i64>,
    drops_entries: u64,
    drops_from_index: Option<i64>,
    drops_to_index: Option<i64>,
    drops_committed: u64,
    appends_entries: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CompareExport {
    out: String,
    format: String,
    messages: u64,
    by_source: Object,
    not_exported: u64,
}

// DLedger-mode stores

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DledgerInfo {
    store: String,
    mode: String,
    clean_shutdown: bool,
    dledger: DledgerLog,
    commitlog_files: usize,
    commitlog_min_offset: u64,
    commitlog_max_offset: u64,
    notes: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DledgerLog {
    self_id: String,
    current_term: Option<i64>,
    vote_leader: Option<String>,
    ledger_begin_index: Option<i64>,
    ledger_end_index: Option<i64>,
    ledger_end_term: Option<i64>,
    checkpoint_committed_index: Option<i64>,
    checkpoint_end_index: Option<i64>,
    committed_index: Option<i64>,
    committed_pos: Option<u64>,
    data_end_pos: u64,
    index_end_pos: u64,
    divided_commitlog_offset: u64,
    converted: bool,
    commit_rule: String,
    served_end: u64,
    geometry: DledgerGeometry,
    data_files: Vec<InfoFile>,
    index_files: Vec<InfoFile>,
    notes: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DledgerGeometry {
    data_file_size: Sourced<u64>,
    index_file_size: Sourced<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DledgerEntry {
    index: i64,
    term: i64,
    pos: i64,
    size: i32,
    file: String,
    record_offset: i64,
    topic: Option<String>,
    queue_id: Option<i32>,
    queue_offset: Option<i64>,
    physical_offset: Option<i64>,
    uncommitted: bool,
    gap: Option<DledgerGap>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DledgerGap {
    what: String,
    expected: i64,
    found: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DledgerIndex {
    index: i64,
    magic: i32,
    pos: i64,
    size: i32,
    term: i64,
    state: String,
    field: Option<String>,
    unit_value: Option<i64>,
    entry_value: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DumpDledgerSummary {
    entries: u64,
    first_index: Option<i64>,
    last_index: Option<i64>,
    committed_index: Option<i64>,
    end_pos: u64,
    gaps: u64,
    stopped: Option<String>,
    index_units: u64,
    index_disagreements: u64,
}

// 5.x timer files and messages

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TimerUnit {
    timerlog_position: u64,
    prev_position: i64,
    magic: i32,
    roll: bool,
    delete: bool,
    enqueue_timestamp: i64,
    slot_timestamp: i64,
    commitlog_offset: i64,
    size: i32,
    real_topic_hash: i32,
    real_topic: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TimerSlot {
    slot: u64,
    slot_timestamp: i64,
    first_position: i64,
    last_position: i64,
    num: i32,
    magic: i32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Timercheck {
    file: String,
    last_read_timestamp: i64,
    last_timerlog_flush_position: i64,
    last_timer_queue_offset: i64,
    master_timer_queue_offset: i64,
    data_version: TimerDataVersion,
    timing_counts: Option<Vec<TimingCount>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TimerDataVersion {
    state_version: i64,
    timestamp: i64,
    counter: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TimingCount {
    topic: String,
    count: i64,
    timestamp: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TimerCounts {
    read_timestamp: i64,
    pending: u64,
    rolled: u64,
    delivered: u64,
    due_now: u64,
    next_release_timestamp: Option<i64>,
    last_release_timestamp: Option<i64>,
    topics: Vec<TopicTimers>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TopicTimers {
    topic: String,
    pending: u64,
}

/// `pending`'s `timers` line: the counts, flattened, and the messages listed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Timers {
    read_timestamp: i64,
    pending: u64,
    rolled: u64,
    delivered: u64,
    due_now: u64,
    next_release_timestamp: Option<i64>,
    last_release_timestamp: Option<i64>,
    topics: Vec<TopicTimers>,
    messages: Vec<TimerMessage>,
    not_listed: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TimerMessage {
    state: String,
    uniq_key: Option<String>,
    real_topic: Option<String>,
    real_queue_id: Option<i32>,
    timer_out_timestamp: i64,
    release_timestamp: i64,
    requested: std::collections::BTreeMap<String, String>,
    roll_times: i32,
    commitlog_offset: i64,
    queue_offset: i64,
    store_timestamp: i64,
    unit: Option<TimerUnitPlace>,
    delivered: Option<TimerCopy>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TimerUnitPlace {
    timerlog_position: u64,
    slot_timestamp: i64,
    magic: i32,
    rolled: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TimerCopy {
    commitlog_offset: i64,
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    store_timestamp: i64,
    dequeue_timestamp: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DumpTimerlogSummary {
    files: u64,
    file_size: u64,
    units: u64,
    data_end: u64,
    problem: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DumpTimerwheelSummary {
    slots: u64,
    non_empty_slots: u64,
    messages: i64,
}

impl Summary {
    fn command(&self) -> &'static str {
        match self {
            Summary::Verify(_) => "verify",
            Summary::ExplainRecovery(_) => "verify --explain-recovery",
            Summary::Info(_) => "info",
            Summary::DumpCommitlog(_) => "dump commitlog",
            Summary::DumpConsumequeue(_) => "dump consumequeue",
            Summary::DumpIndex(_) => "dump index",
            Summary::DumpCheckpoint(_) => "dump checkpoint",
            Summary::DumpConfig(_) => "dump config",
            Summary::Query(_) => "query",
            Summary::Pull(_) => "pull",
            Summary::Pending(_) => "pending",
            Summary::Rebuild(_) => "rebuild",
            Summary::Repair(_) => "repair",
            Summary::Export(_) => "export",
            Summary::Replay(_) => "replay",
            Summary::Gen(_) => "gen",
            Summary::Offsets(_) => "offsets",
            Summary::Config(_) => "config",
            Summary::Trace(_) => "trace",
            Summary::DumpTimerlog(_) => "dump timerlog",
            Summary::DumpTimerwheel(_) => "dump timerwheel",
            Summary::DumpTimercheck(_) => "dump timercheck",
            Summary::DumpDledger(_) => "dump dledger",
            Summary::Compare(_) => "compare",
            Summary::Send(_) => "send",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct VerifySummary {
    errors: u64,
    warnings: u64,
    infos: u64,
    messages: u64,
    bytes: u64,
    commitlog_files: u64,
    consume_queues: u64,
    cq_units: u64,
    index_files: u64,
    index_entries_checked: u64,
    duplicate_uniq_keys: u64,
    findings_not_listed: u64,
    findings_per_code: std::collections::BTreeMap<String, u64>,
    healthy: bool,
    strict: bool,
    crc_checked: bool,
    parts: Vec<String>,
    topic: Option<String>,
    sample: u64,
    store_version: String,
    clean_shutdown: bool,
    refuses_to_start: Vec<String>,
    recovery_mode: Option<String>,
    recovery_cut: Option<u64>,
    recovery_drops_messages: u64,
    duplicate_window: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ExplainRecoverySummary {
    loses_nothing: bool,
    messages_dropped: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct InfoSummary {
    topics: usize,
    consumer_groups: usize,
    index_files: usize,
    notes: usize,
    needs_verify: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DumpCommitlogSummary {
    messages: u64,
    files: u64,
    truncated: bool,
    problems: u64,
    started_at: Option<u64>,
    uncommitted: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DumpConsumequeueSummary {
    queues: Vec<ConsumequeueQueue>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ConsumequeueQueue {
    topic: String,
    queue_id: i32,
    min_offset: u64,
    max_offset: u64,
    units: u64,
    truncated: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DumpIndexSummary {
    files: u64,
    entries: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DumpCheckpointSummary {
    files: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DumpConfigSummary {
    files: u64,
    missing: u64,
    from_backup: u64,
    empty: u64,
}

/// One struct for every kind of query: a field a kind does not give is absent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct QuerySummary {
    query: String,
    method: String,
    messages: u64,
    body_crc_failed: Vec<u64>,
    truncated: bool,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    topic: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    records_scanned: Option<u64>,
    #[serde(default)]
    bytes_scanned: Option<u64>,
    #[serde(default)]
    index_files: Option<u64>,
    #[serde(default)]
    commitlog_offsets: Option<Vec<i64>>,
    #[serde(default)]
    collisions: Option<u64>,
    #[serde(default)]
    index_last_update_timestamp: Option<i64>,
    #[serde(default)]
    index_last_update_commitlog_offset: Option<i64>,
    #[serde(default)]
    store_host: Option<String>,
    #[serde(default)]
    commitlog_offset: Option<u64>,
    #[serde(default)]
    topics_searched: Option<u64>,
    #[serde(default)]
    queue_id: Option<i32>,
    #[serde(default)]
    queue_offset: Option<u64>,
    #[serde(default)]
    min_offset: Option<i64>,
    #[serde(default)]
    max_offset: Option<i64>,
    #[serde(default)]
    broker_rules: Option<String>,
    #[serde(default)]
    broker_rules_from: Option<String>,
    #[serde(default)]
    begin_timestamp: Option<i64>,
    #[serde(default)]
    end_timestamp: Option<i64>,
    #[serde(default)]
    queues: Option<Vec<TimeQueue>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TimeQueue {
    topic: String,
    queue_id: i32,
    offset_in_queue_by_time: i64,
    start_offset: i64,
    messages: u64,
    more_after_end: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct PullSummary {
    topic: String,
    group: String,
    queues: u64,
    messages: u64,
    client_filtered: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct PendingSummary {
    now_timestamp: i64,
    groups: u64,
    lag: i64,
    delay_levels: u64,
    delayed_pending: u64,
    transactions: u64,
    timers_pending: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RebuildSummary {
    rebuilt: bool,
    records: u64,
    bytes: u64,
    queues: u64,
    units: u64,
    index_files: u64,
    end_commitlog_offset: u64,
    stopped_early: Option<String>,
    records_after_stop: u64,
    refused: u64,
    first_refused: Option<u64>,
    last_store_timestamp: i64,
    last_queued_timestamp: i64,
    index_msg_timestamp: i64,
    #[serde(default)]
    dledger_index_units: Option<u64>,
    out: Option<String>,
    seconds: f64,
    geometry: Geometry,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RepairSummary {
    dry_run: bool,
    actions: u64,
    cut: Option<RepairCut>,
    headers_mended: u64,
    tombstones: u64,
    fillers: u64,
    lost: Vec<RepairLost>,
    messages_kept: u64,
    salvaged_records: u64,
    salvaged_bytes: u64,
    removed_bytes: u64,
    removed_data_bytes: u64,
    removed_file_bytes: u64,
    dledger: Option<RepairDledger>,
    store: Option<String>,
    repair_folder: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RepairDledger {
    self_id: String,
    last_index: Option<i64>,
    last_term: Option<i64>,
    first_cut_index: Option<i64>,
    checkpoint_was: Option<RepairDledgerCheckpoint>,
    checkpoint: RepairDledgerCheckpoint,
    index_rebuilt: bool,
    index_file_size: Option<u64>,
    index_file_size_source: Option<String>,
    caught_up_from_leader: bool,
    commit_rule: String,
    uncommitted_kept: Option<(i64, i64)>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RepairDledgerCheckpoint {
    end_index: Option<i64>,
    committed_index: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RepairLost {
    commitlog_offset: u64,
    size: u64,
    topic: Option<String>,
    queue_id: Option<i32>,
    queue_offset: Option<i64>,
    msg_id: Option<String>,
    uniq_key: Option<String>,
    keys: Vec<String>,
    proof: String,
    replaced_by: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RepairCut {
    file: String,
    file_offset: u64,
    commitlog_offset: u64,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SendLine {
    key: u64,
    seq: u64,
    found: SendFound,
    uniq_key: Option<String>,
    topic: Option<String>,
    queue_id: Option<i32>,
    status: String,
    broker: Option<String>,
    queue_offset: Option<i64>,
    offset_msg_id: Option<String>,
    send_status: Option<String>,
    delay: Option<SendDelay>,
    why: Option<String>,
    possible_duplicate: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SendFound {
    source: String,
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    commitlog_offset: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SendDelay {
    kind: String,
    level: Option<i32>,
    remaining_ms: Option<i64>,
    deliver_timestamp: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SendPlan {
    topic: String,
    queue_id: Option<i32>,
    target_queue_id: Option<i32>,
    broker: Option<String>,
    messages: u64,
    delayed: u64,
    skipped: u64,
    rule: SendRule,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SendRule {
    rule: String,
    queues: Option<i32>,
    why: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SendSummary {
    dry_run: bool,
    source: String,
    source_kind: String,
    target: Option<String>,
    journal: String,
    messages: u64,
    sent: u64,
    skipped: u64,
    refused: u64,
    undecided: u64,
    unconfirmed: u64,
    in_doubt: u64,
    possible_duplicates: u64,
    in_doubt_before: u64,
    not_sent: u64,
    delayed: u64,
    released: u64,
    batches: u64,
    by_source: Object,
    passed_over: Object,
    stopped: Option<SendStopped>,
    missing_topics: Vec<String>,
    unchecked: Option<String>,
    interrupted: bool,
    failure: Option<String>,
    journal_cut_bytes: u64,
    elapsed_ms: u64,
    topics: std::collections::BTreeMap<String, SendTopic>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SendStopped {
    key: u64,
    why: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SendTopic {
    messages: u64,
    sent: u64,
    found_in: std::collections::BTreeMap<String, u64>,
    source_queues: i32,
    order: bool,
    rule: Option<SendRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ExportSummary {
    group: String,
    topics: Vec<String>,
    out: String,
    format: String,
    messages: u64,
    by_source: Object,
    duplicates_dropped: u64,
    unreadable: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ReplaySummary {
    group: String,
    topics: Vec<String>,
    end: String,
    stats: ReplayStats,
    offsets: Vec<ReplayOffset>,
    overlay: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ReplayStats {
    delivered: u64,
    consumed: u64,
    retried: u64,
    dead_lettered: u64,
    suspended: u64,
    local_retries: u64,
    acknowledged: u64,
    interrupted: u64,
    unreadable: u64,
    delayed_delivered: u64,
    timers_delivered: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ReplayOffset {
    topic: String,
    queue_id: i32,
    committed_offset: i64,
    max_offset: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct QueueOffset {
    group: String,
    topic: String,
    queue_id: i32,
    committed_offset: i64,
    min_offset: i64,
    max_offset: i64,
    lag: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct OffsetChange {
    topic: String,
    queue_id: i32,
    old_offset: Option<i64>,
    new_offset: Option<i64>,
    min_offset: i64,
    max_offset: i64,
    redelivered: i64,
    skipped: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct OffsetsSummary {
    action: String,
    queues: u64,
    lag: Option<i64>,
    redelivered: i64,
    skipped: i64,
    applied: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ConfigEntry {
    file: String,
    name: String,
    properties: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ConfigChange {
    name: String,
    key: String,
    old_value: Option<String>,
    new_value: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ConfigSummary {
    file: String,
    action: String,
    entries: u64,
    changes: u64,
    applied: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct GenSummary {
    records: u64,
    bytes: u64,
    delayed_pending: u64,
    delayed_delivered: u64,
    trace_messages: u64,
    trace_records: u64,
    dledger_entries: u64,
    divided_commitlog_offset: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TraceSummary {
    trace_topic: String,
    trace_topic_exists: bool,
    lookup: Option<String>,
    messages: u64,
    trace_messages: u64,
    records: u64,
    undecodable: u64,
    capped: bool,
}

// ---------------------------------------------------------------------------------------------
// Running the binary

/// What one run printed: every stdout line (each must be a JSON line of the schema), the JSON
/// lines of stderr but its `note` lines, the exit code.
struct Run {
    stdout: Vec<Line>,
    stderr: Vec<Line>,
    code: i32,
}

fn parse(line: &str, args: &[String], stream: &str) -> Line {
    let v: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{args:?}: {stream} line is not JSON ({e}): {line}"));
    let first = v.as_object().and_then(|o| o.keys().next().cloned());
    assert_eq!(
        first.as_deref(),
        Some("type"),
        "{args:?}: `type` is not the first field: {line}"
    );
    serde_json::from_value(v)
        .unwrap_or_else(|e| panic!("{args:?}: {stream} line does not fit the schema ({e}): {line}"))
}

/// `run!(a, b, ...)`: run the binary with these arguments (anything an `OsString` is made from).
macro_rules! run {
    ($($a:expr),* $(,)?) => {
        run_args(&[$(std::ffi::OsString::from($a)),*])
    };
}

fn run_args(args: &[std::ffi::OsString]) -> Run {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let out = bin().args(&args).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or(-1);
    assert!(code == 0 || code == 1, "{args:?}: exit {code}: {stderr}");
    Run {
        stdout: stdout.lines().map(|l| parse(l, &args, "stdout")).collect(),
        stderr: stderr
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| parse(l, &args, "stderr"))
            .filter(|l| !matches!(l, Line::Note(_)))
            .collect(),
        code,
    }
}

fn kinds(lines: &[Line]) -> Vec<&'static str> {
    lines.iter().map(Line::kind).collect()
}

/// The one summary of `lines`, which must be its last line, of `command`.
fn summary_of<'a>(lines: &'a [Line], command: &str, what: &str) -> &'a Summary {
    let n = lines
        .iter()
        .filter(|l| matches!(l, Line::Summary(_)))
        .count();
    assert_eq!(n, 1, "{what}: {n} summaries in {:?}", kinds(lines));
    match lines.last() {
        Some(Line::Summary(s)) => {
            assert_eq!(s.command(), command, "{what}");
            s
        }
        _ => panic!("{what}: the summary is not last: {:?}", kinds(lines)),
    }
}

impl Run {
    /// A report: objects of `types` (each at least once) then the summary, all on stdout.
    fn report(&self, command: &str, types: &[&str]) -> &Summary {
        let k = kinds(&self.stdout);
        for t in types {
            assert!(k.contains(t), "{command}: no {t} in {k:?}");
        }
        for t in &k[..k.len().saturating_sub(1)] {
            assert!(types.contains(t), "{command}: unexpected {t} in {k:?}");
        }
        assert!(self.stderr.is_empty(), "{command}: JSON on stderr");
        summary_of(&self.stdout, command, command)
    }

    /// A stream: messages only on stdout (at least one), `side` types then the summary on stderr.
    fn stream(&self, command: &str, side: &[&str]) -> &Summary {
        assert!(!self.stdout.is_empty(), "{command}: no message");
        for l in &self.stdout {
            assert!(
                matches!(l, Line::Message(_)),
                "{command}: a {} on stdout",
                l.kind()
            );
        }
        let k = kinds(&self.stderr);
        for t in &k[..k.len().saturating_sub(1)] {
            assert!(
                side.contains(t),
                "{command}: unexpected {t} on stderr: {k:?}"
            );
        }
        summary_of(&self.stderr, command, command)
    }

    fn messages(&self) -> Vec<&Message> {
        self.stdout
            .iter()
            .filter_map(|l| match l {
                Line::Message(m) => Some(m),
                _ => None,
            })
            .collect()
    }
}

/// Every reading command on `store`, checked against the schema.
fn every_reader(store: &Path, topic: &str, group: &str) {
    let s = store.as_os_str();
    // dump commitlog: a stream
    let r = run!("dump", "commitlog", s, "--json", "--count", "300",);
    let Summary::DumpCommitlog(d) = r.stream("dump commitlog", &[]) else {
        unreachable!()
    };
    assert_eq!(d.messages as usize, r.stdout.len());
    let msgs = r.messages();
    let keyed = msgs
        .iter()
        .find(|m| m.topic == topic && !m.keys.is_empty())
        .unwrap_or_else(|| panic!("no message of {topic} with keys"));
    let uniq = msgs
        .iter()
        .find(|m| m.uniq_key.is_some())
        .expect("a message with a UNIQ_KEY");

    // query: every kind, a stream
    let queries: Vec<Vec<String>> = vec![
        vec![
            "--topic".into(),
            topic.into(),
            "--key".into(),
            keyed.keys[0].clone(),
        ],
        vec![
            "--topic".into(),
            topic.into(),
            "--key".into(),
            keyed.keys[0].clone(),
            "--scan".into(),
        ],
        vec!["--msg-id".into(), keyed.msg_id.clone()],
        vec!["--msg-id".into(), uniq.uniq_key.clone().unwrap()],
        vec![
            "--topic".into(),
            keyed.topic.clone(),
            "--queue".into(),
            keyed.queue_id.to_string(),
            "--offset".into(),
            keyed.queue_offset.to_string(),
        ],
        vec![
            "--topic".into(),
            topic.into(),
            "--begin".into(),
            keyed.store_timestamp.to_string(),
        ],
    ];
    for q in queries {
        let mut args: Vec<String> = vec!["query".into(), store.display().to_string()];
        args.extend(q);
        args.push("--json".into());
        let r = run_args(
            &args
                .iter()
                .map(std::ffi::OsString::from)
                .collect::<Vec<_>>(),
        );
        let Summary::Query(q) = r.stream("query", &[]) else {
            unreachable!()
        };
        assert_eq!(q.messages as usize, r.stdout.len(), "{args:?}");
        if q.query == "time" {
            assert!(
                q.begin_timestamp.is_some() && q.queues.is_some(),
                "{args:?}"
            );
            assert_eq!(q.end_timestamp, None, "no --end: no end, {args:?}");
        }
    }

    // dump consumequeue, index, checkpoint, config; info; pending: reports
    let r = run!(
        "dump",
        "consumequeue",
        s,
        "--topic",
        topic,
        "--count",
        "5",
        "--json",
    );
    r.report("dump consumequeue", &["unit"]);
    let r = run!("dump", "index", s, "--json");
    r.report("dump index", &["index_header", "index_entry"]);
    let r = run!("dump", "index", s, "--header-only", "--json",);
    r.report("dump index", &["index_header"]);
    let r = run!("dump", "checkpoint", s, "--json");
    r.report("dump checkpoint", &["checkpoint"]);
    let r = run!("dump", "config", s, "--json");
    r.report("dump config", &["config"]);
    assert_eq!(r.stdout.len(), 5);
    let r = run!("info", s, "--json");
    r.report("info", &["info"]);
    assert_eq!(r.stdout.len(), 2);
    let r = run!("pending", s, "--json", "--all");
    r.report("pending", &["group", "delay_level", "transaction"]);
    let r = run!("verify", s, "--json");
    r.report("verify", &[]);
    let r = run!("verify", s, "--explain-recovery", "--json",);
    r.report("verify --explain-recovery", &["recovery"]);

    // pull: messages on stdout, each queue's answer and the summary on stderr
    let r = run!("pull", s, "--topic", topic, "--group", group, "--from", "first", "--json",);
    let Summary::Pull(p) = r.stream("pull", &["pull"]) else {
        unreachable!()
    };
    let pulls = kinds(&r.stderr).iter().filter(|k| **k == "pull").count();
    assert_eq!(pulls as u64, p.queues);
    assert_eq!(p.messages as usize, r.stdout.len());

    // export to stdout: a stream
    let r = run!("export", s, "--group", group, "--out", "-", "--json",);
    r.stream("export", &[]);
    assert!(r.messages().iter().all(|m| m.export_source.is_some()));
}

/// The commands that write, on a copy of `store`.
fn every_writer(store: &Path, group: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("store");
    copy_tree(store, &copy);
    let c = copy.as_os_str();

    let file = tmp.path().join("out.jsonl");
    let r = run!(
        "export",
        c,
        "--group",
        group,
        "--out",
        file.as_os_str(),
        "--json",
    );
    r.report("export", &[]);
    for l in std::fs::read_to_string(&file).unwrap().lines() {
        assert!(matches!(
            parse(l, &["export file".into()], "file"),
            Line::Message(_)
        ));
    }

    let rebuilt = tmp.path().join("rebuilt");
    let r = run!("rebuild", c, "--out", rebuilt.as_os_str(), "--json",);
    let Summary::Rebuild(b) = r.report("rebuild", &[]) else {
        unreachable!()
    };
    assert!(b.rebuilt);

    let overlay = tmp.path().join("overlay");
    let r = run!(
        "replay",
        c,
        "--group",
        group,
        "--exec",
        "cat >/dev/null",
        "--until-idle",
        "--overlay",
        overlay.as_os_str(),
        "--json",
    );
    r.report("replay", &[]);

    // damage: an abort file and a torn record, then verify and repair
    std::fs::write(copy.join("abort"), b"").unwrap();
    let mut cl: Vec<PathBuf> = std::fs::read_dir(copy.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cl.sort();
    let mut bytes = std::fs::read(&cl[0]).unwrap();
    for b in &mut bytes[200..260] {
        *b ^= 0x5a;
    }
    std::fs::write(&cl[0], &bytes).unwrap();
    let r = run!("verify", c, "--json");
    assert_eq!(r.code, 1);
    let Summary::Verify(v) = r.report("verify", &["finding", "recovery"]) else {
        unreachable!()
    };
    assert!(!v.healthy);
    let r = run!("verify", c, "--explain-recovery", "--json",);
    r.report("verify --explain-recovery", &["recovery"]);
    let r = run!("repair", c, "--dry-run", "--json",);
    r.report("repair", &["action"]);
    let repaired = tmp.path().join("repaired");
    let r = run!("repair", c, "--out", repaired.as_os_str(), "--json",);
    let Summary::Repair(p) = r.report("repair", &["action"]) else {
        unreachable!()
    };
    assert!(!p.dry_run && p.store.is_some());
}

#[test]
fn every_command_on_the_fixtures_fits_the_schema() {
    for (name, topic, group) in [
        ("store-4.9", "OrderTopic", "OrderGroup"),
        ("store-5x", "OrderTopic", "OrderGroup"),
    ] {
        let store = fixture(name);
        assert!(store.join("commitlog").is_dir(), "{name} is missing");
        every_reader(&store, topic, group);
    }
}

/// `send --dry-run`: a plan line per queue, the undecided transactions, a summary; on stores and
/// on an export file.
#[test]
fn send_plans_fit_the_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fixture("store-4.9");
    let file = tmp.path().join("x.jsonl");
    bin()
        .arg("export")
        .arg(&store)
        .args(["-g", "OrderGroup", "--include", "all", "--out"])
        .arg(&file)
        .assert()
        .success();
    // the store's undecided transactions are listed as `send` lines; the group has none
    for (source, types) in [
        (store.clone(), &["send_plan", "send"][..]),
        (file, &["send_plan"][..]),
    ] {
        let r = run!(
            "send",
            &source,
            "--dry-run",
            "--json",
            "--journal",
            tmp.path().join("j")
        );
        let Summary::Send(s) = r.report("send", types) else {
            unreachable!()
        };
        assert!(s.dry_run && s.messages > 0 && s.sent == 0);
        assert_eq!(
            s.unchecked.as_deref(),
            Some("no --namesrv or --broker given")
        );
        let planned: u64 = r
            .stdout
            .iter()
            .filter_map(|l| match l {
                Line::SendPlan(p) => Some(p.messages),
                _ => None,
            })
            .sum();
        assert_eq!(planned + s.undecided, s.messages);
    }
}

#[test]
fn compare_fits_the_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fixture("store-4.9");
    // a slave that got as far as the start of the master's last file, with a topic of its own
    let slave = tmp.path().join("slave");
    copy_tree(&store, &slave);
    let mut files: Vec<PathBuf> = std::fs::read_dir(slave.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    std::fs::remove_file(files.last().unwrap()).unwrap();
    let cfg = slave.join("config");
    let mut topics = rmqstore::format::config::load::<rmqstore::format::config::TopicConfigs>(&cfg)
        .unwrap()
        .value;
    topics.insert(rmqstore::format::config::TopicConfig::new("SlaveOnlyTopic"));
    rmqstore::format::config::save(&cfg, &topics).unwrap();
    let lost = tmp.path().join("lost.jsonl");
    let r = run!(
        "compare",
        store.as_os_str(),
        slave.as_os_str(),
        "--export",
        lost.as_os_str(),
        "--json",
    );
    assert_eq!(r.code, 1);
    let Summary::Compare(c) = r.report(
        "compare",
        &["compare_record", "compare_store", "config_difference"],
    ) else {
        unreachable!()
    };
    assert!(c.lost_records > 0 && c.export.is_some());
    for l in std::fs::read_to_string(&lost).unwrap().lines() {
        assert!(matches!(
            parse(l, &["compare export".into()], "file"),
            Line::Message(_)
        ));
    }
}

#[test]
fn writing_commands_and_a_damaged_store_fit_the_schema() {
    every_writer(&fixture("store-4.9"), "OrderGroup");
}

#[test]
fn offsets_and_config_fit_the_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    let s = store.as_os_str();
    let r = run!("offsets", s, "show", "--json");
    let Summary::Offsets(o) = r.report("offsets", &["queue_offset"]) else {
        unreachable!()
    };
    assert!(o.lag.is_some_and(|l| l > 0));
    for action in [
        vec![
            "set",
            "-g",
            "OrderGroup",
            "-t",
            "OrderTopic",
            "--to",
            "first",
        ],
        vec!["clone", "--from", "OrderGroup", "--to", "G2", "--apply"],
        vec!["delete", "-g", "G2"],
    ] {
        let mut a = vec![std::ffi::OsString::from("offsets"), s.to_owned()];
        a.extend(action.iter().map(std::ffi::OsString::from));
        a.push("--json".into());
        let r = run_args(&a);
        let Summary::Offsets(o) = r.report("offsets", &["offset_change"]) else {
            unreachable!()
        };
        assert_eq!(o.action, action[0]);
    }
    for (which, action) in [
        ("topics", vec!["show"]),
        ("groups", vec!["show"]),
        ("topics", vec!["set", "OrderTopic", "readQueueNums=8"]),
        ("groups", vec!["delete", "OrderGroup"]),
    ] {
        let mut a = vec!["config".into(), s.to_owned(), which.into()];
        a.extend(action.iter().map(std::ffi::OsString::from));
        a.push("--json".into());
        let r = run_args(&a);
        let kind = if action[0] == "show" {
            "config_entry"
        } else {
            "config_change"
        };
        let Summary::Config(c) = r.report("config", &[kind]) else {
            unreachable!()
        };
        assert_eq!(c.action, action[0]);
    }
}

#[test]
fn gen_fits_the_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("g");
    let r = run!("gen", dir.as_os_str(), "--messages", "50", "--json",);
    r.report("gen", &[]);
    let dir = tmp.path().join("d");
    let r = run!(
        "gen",
        dir.as_os_str(),
        "--messages",
        "50",
        "--dledger",
        "--converted",
        "--json",
    );
    r.report("gen", &[]);
}

#[test]
fn trace_fits_the_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("g");
    let r = run!(
        "gen",
        dir.as_os_str(),
        "--messages",
        "400",
        "--traces",
        "--json"
    );
    let Summary::Gen(g) = r.report("gen", &[]) else {
        unreachable!()
    };
    assert!(g.trace_messages > 0 && g.trace_records > g.trace_messages);
    let s = dir.as_os_str();
    // a transaction's half message: sent, ended, and (committed) consumed
    let r = run!(
        "dump",
        "commitlog",
        s,
        "--topic",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "--json"
    );
    let halves: Vec<String> = r
        .messages()
        .iter()
        .filter_map(|m| m.uniq_key.clone())
        .collect();
    let mut kinds_seen = (false, false, false);
    for id in &halves {
        let r = run!("trace", s, "--msg-id", id, "--json");
        let Summary::Trace(t) = r.report("trace", &["trace"]) else {
            unreachable!()
        };
        assert!(
            t.trace_topic_exists && t.messages == 1 && !t.capped,
            "{t:?}"
        );
        assert_eq!(t.lookup.as_deref(), Some("index"));
        let Line::Trace(tr) = &r.stdout[0] else {
            unreachable!()
        };
        kinds_seen.0 |= !tr.sent.is_empty();
        kinds_seen.1 |= !tr.end_transaction.is_empty();
        kinds_seen.2 |= !tr.consumed.is_empty();
    }
    assert_eq!(kinds_seen, (true, true, true), "{halves:?}");
    // by topic and time: many trace lines
    let r = run!(
        "trace",
        s,
        "--topic",
        "PaymentTopic",
        "--since",
        "0",
        "--json"
    );
    let Summary::Trace(t) = r.report("trace", &["trace"]) else {
        unreachable!()
    };
    assert_eq!(t.lookup.as_deref(), Some("consume_queue"));
    assert!(t.messages > 10, "{t:?}");
    // a store without traces: only the summary, exit status 1
    let r = run!(
        "trace",
        fixture("store-4.9").as_os_str(),
        "--key",
        "k",
        "--json"
    );
    assert_eq!(r.code, 1);
    let Summary::Trace(t) = summary_of(&r.stdout, "trace", "no trace topic") else {
        unreachable!()
    };
    assert!(!t.trace_topic_exists && t.lookup.is_none());
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn the_oracle_stores_fit_the_schema() {
    let mut seen = 0;
    for name in ORACLES {
        let dir = match oracle(name) {
            Some(d) => d,
            None if std::env::var_os("CI").is_some() => {
                panic!("oracle store {name} is missing under CI")
            }
            None => continue,
        };
        let store = dir.join("store");
        let s = store.as_os_str();
        let r = run!("dump", "commitlog", s, "--json");
        r.stream("dump commitlog", &[]);
        for args in [
            vec!["info", "--json"],
            vec!["verify", "--json"],
            vec!["verify", "--explain-recovery", "--json"],
            vec!["pending", "--json"],
        ] {
            let mut a = vec![std::ffi::OsString::from(args[0]), s.to_owned()];
            a.extend(args[1..].iter().map(std::ffi::OsString::from));
            let r = run_args(&a);
            assert!(
                matches!(r.stdout.last(), Some(Line::Summary(_))),
                "{args:?}"
            );
            assert!(r.stderr.is_empty());
        }
        seen += 1;
    }
    if seen == 0 {
        eprintln!("SKIPPED: no oracle store: nothing was checked (CI fails here instead)");
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn the_dledger_stores_fit_the_schema() {
    for name in [
        "dledger-4.9",
        "dledger-crashed-4.9",
        "dledger-converted-4.9",
    ] {
        let Some(dir) = oracle(name) else { continue };
        let s = dir.join("store");
        let s = s.as_os_str();
        run!("info", s, "--json").report("info", &["dledger_info"]);
        run!("dump", "dledger", s, "--json").report("dump dledger", &["dledger_entry"]);
        run!("dump", "dledger", s, "--index", "--json").report("dump dledger", &["dledger_index"]);
        run!("verify", s, "--explain-recovery", "--json")
            .report("verify --explain-recovery", &["recovery"]);
        let r = run!("dump", "commitlog", s, "--json");
        r.stream("dump commitlog", &[]);
        assert!(r.stdout.len() > 2000, "{name}");
        let t = tempfile::tempdir().unwrap();
        let out = t.path().join("out");
        run!(
            "rebuild",
            s,
            "--dledger-index",
            "--out",
            out.as_os_str(),
            "--json"
        )
        .report("rebuild", &[]);
        // against a copy without its last data file: it lags, and is appended to
        let tmp = tempfile::tempdir().unwrap();
        let copy = tmp.path().join("copy");
        copy_tree(&dir.join("store"), &copy);
        let data = copy.join("dledger-n0").join("data");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        std::fs::remove_file(files.last().unwrap()).unwrap();
        let r = run!("compare", s, copy.as_os_str(), "--json");
        let Summary::Compare(c) = r.report("compare", &["compare_store"]) else {
            unreachable!()
        };
        assert_eq!(c.truncations.len(), 1, "{name}");
    }
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn the_timer_files_and_messages_fit_the_schema() {
    let Some(dir) = oracle("timer-5.x") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "oracle timer-5.x is missing under CI"
        );
        return;
    };
    let store = dir.join("store");
    let s = store.as_os_str();
    let r = run!("dump", "timerlog", s, "--json");
    r.report("dump timerlog", &["timer_unit"]);
    assert_eq!(r.stdout.len(), 130);
    let r = run!("dump", "timerwheel", s, "--json");
    r.report("dump timerwheel", &["timer_slot"]);
    let r = run!("dump", "timercheck", s, "--json");
    r.report("dump timercheck", &["timercheck"]);
    let r = run!(
        "pending",
        s,
        "--json",
        "--all",
        "--now",
        "2026-12-01T00:00:00Z"
    );
    r.report("pending", &["group", "timers"]);
    let timers = r.stdout.iter().find_map(|l| match l {
        Line::Timers(t) => Some(t),
        _ => None,
    });
    let t = timers.expect("a timers line");
    assert_eq!((t.pending, t.delivered, t.rolled), (64, 65, 16));
    assert_eq!(t.messages.len(), 64);
    let r = run!("info", s, "--json");
    r.report("info", &["info"]);
    let Some(Line::Info(i)) = r.stdout.first() else {
        panic!("no info line")
    };
    assert_eq!(i.timers.as_ref().map(|t| t.pending), Some(64));
}

// ---------------------------------------------------------------------------------------------
// docs/json.md names every field

/// The serialized names of a struct's fields, as serde's derive lists them.
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Catch<'a>(&'a mut &'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for Catch<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(serde::de::Error::custom("caught"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Catch(&mut fields));
    assert!(!fields.is_empty());
    fields
}

/// The text of the section under `heading` (up to the next heading of the same or a higher
/// level).
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let start = doc
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/json.md has no section {heading:?}"));
    let body = &doc[start + heading.len() + 2..];
    let end = body
        .match_indices("\n#")
        .find(|(i, _)| {
            let n = body[i + 1..].chars().take_while(|c| *c == '#').count();
            n <= level
        })
        .map(|(i, _)| i)
        .unwrap_or(body.len());
    &body[..end]
}

#[test]
fn docs_name_every_field_of_every_type() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.md"))
        .unwrap();
    let t = |name: &str| format!("### `{name}`");
    let sm = |cmd: &str| format!("#### `summary` of `{cmd}`");
    let sections: Vec<(String, &[&str])> = vec![
        (t("message"), fields_of::<Message>()),
        (t("note"), fields_of::<Note>()),
        (t("error"), fields_of::<ErrorLine>()),
        (t("unit"), fields_of::<Unit>()),
        (t("index_header"), fields_of::<IndexHeader>()),
        (t("index_header"), fields_of::<IndexHeaderFields>()),
        (t("index_entry"), fields_of::<IndexEntry>()),
        (t("checkpoint"), fields_of::<Checkpoint>()),
        (t("config"), fields_of::<Config>()),
        (t("finding"), fields_of::<Finding>()),
        (t("recovery"), fields_of::<Recovery>()),
        (t("recovery"), fields_of::<VersionGuess>()),
        (t("recovery"), fields_of::<FileRef>()),
        (t("recovery"), fields_of::<RecoveryCut>()),
        (t("recovery"), fields_of::<DeletedFile>()),
        (t("recovery"), fields_of::<QueueTruncation>()),
        (t("recovery"), fields_of::<IndexDrop>()),
        (t("info"), fields_of::<Info>()),
        (t("info"), fields_of::<Geometry>()),
        (t("info"), fields_of::<Sourced<u64>>()),
        (t("info"), fields_of::<InfoCommitlog>()),
        (t("info"), fields_of::<InfoFile>()),
        (t("info"), fields_of::<InfoTopic>()),
        (t("info"), fields_of::<InfoQueue>()),
        (t("info"), fields_of::<InfoGroup>()),
        (t("info"), fields_of::<InfoGroupLag>()),
        (t("info"), fields_of::<InfoRetryDlq>()),
        (t("info"), fields_of::<InfoTransactions>()),
        (t("checkpoint"), fields_of::<CheckpointFields>()),
        (t("index_header"), fields_of::<IndexGeometry>()),
        (t("transaction"), fields_of::<HalfRecord>()),
        (t("info"), fields_of::<InfoGroupQueue>()),
        (t("info"), fields_of::<InfoIndexFile>()),
        (t("info"), fields_of::<InfoDelayLevel>()),
        (t("group"), fields_of::<Group>()),
        (t("group"), fields_of::<GroupQueue>()),
        (t("group"), fields_of::<DelayedMessage>()),
        (t("delay_level"), fields_of::<DelayLevel>()),
        (t("transaction"), fields_of::<Transaction>()),
        (t("pull"), fields_of::<Pull>()),
        (t("action"), fields_of::<Action>()),
        (sm("verify"), fields_of::<VerifySummary>()),
        (
            sm("verify --explain-recovery"),
            fields_of::<ExplainRecoverySummary>(),
        ),
        (sm("info"), fields_of::<InfoSummary>()),
        (sm("dump commitlog"), fields_of::<DumpCommitlogSummary>()),
        (
            sm("dump consumequeue"),
            fields_of::<DumpConsumequeueSummary>(),
        ),
        (sm("dump consumequeue"), fields_of::<ConsumequeueQueue>()),
        (sm("dump index"), fields_of::<DumpIndexSummary>()),
        (sm("dump checkpoint"), fields_of::<DumpCheckpointSummary>()),
        (sm("dump config"), fields_of::<DumpConfigSummary>()),
        (sm("query"), fields_of::<QuerySummary>()),
        (sm("query"), fields_of::<TimeQueue>()),
        (sm("pull"), fields_of::<PullSummary>()),
        (sm("pending"), fields_of::<PendingSummary>()),
        (sm("rebuild"), fields_of::<RebuildSummary>()),
        (sm("repair"), fields_of::<RepairSummary>()),
        (sm("repair"), fields_of::<RepairCut>()),
        (sm("repair"), fields_of::<RepairLost>()),
        (sm("export"), fields_of::<ExportSummary>()),
        (sm("replay"), fields_of::<ReplaySummary>()),
        (sm("replay"), fields_of::<ReplayOffset>()),
        (sm("replay"), fields_of::<ReplayStats>()),
        (sm("gen"), fields_of::<GenSummary>()),
        (t("queue_offset"), fields_of::<QueueOffset>()),
        (t("offset_change"), fields_of::<OffsetChange>()),
        (sm("offsets"), fields_of::<OffsetsSummary>()),
        (t("config_entry"), fields_of::<ConfigEntry>()),
        (t("config_change"), fields_of::<ConfigChange>()),
        (sm("config"), fields_of::<ConfigSummary>()),
        (t("trace"), fields_of::<Trace>()),
        (t("trace"), fields_of::<TraceStored>()),
        (t("trace"), fields_of::<TraceSent>()),
        (t("trace"), fields_of::<TraceConsumed>()),
        (t("trace"), fields_of::<TraceEndTransaction>()),
        (sm("trace"), fields_of::<TraceSummary>()),
        (t("timer_unit"), fields_of::<TimerUnit>()),
        (t("timer_slot"), fields_of::<TimerSlot>()),
        (t("timercheck"), fields_of::<Timercheck>()),
        (t("timercheck"), fields_of::<TimerDataVersion>()),
        (t("timercheck"), fields_of::<TimingCount>()),
        (t("timers"), fields_of::<Timers>()),
        (t("timers"), fields_of::<TopicTimers>()),
        (t("timers"), fields_of::<TimerMessage>()),
        (t("timers"), fields_of::<TimerUnitPlace>()),
        (t("timers"), fields_of::<TimerCopy>()),
        (t("info"), fields_of::<TimerCounts>()),
        (sm("dump timerlog"), fields_of::<DumpTimerlogSummary>()),
        (sm("dump timerwheel"), fields_of::<DumpTimerwheelSummary>()),
        (sm("dump timercheck"), fields_of::<DumpCheckpointSummary>()),
        (t("dledger_info"), fields_of::<DledgerInfo>()),
        (t("dledger_info"), fields_of::<DledgerLog>()),
        (t("dledger_info"), fields_of::<DledgerGeometry>()),
        (t("dledger_entry"), fields_of::<DledgerEntry>()),
        (t("dledger_entry"), fields_of::<DledgerGap>()),
        (t("dledger_index"), fields_of::<DledgerIndex>()),
        (sm("dump dledger"), fields_of::<DumpDledgerSummary>()),
        (t("compare_record"), fields_of::<CompareRecord>()),
        (t("compare_store"), fields_of::<CompareStore>()),
        (t("compare_store"), fields_of::<BrokerSignal>()),
        (t("compare_store"), fields_of::<CompareTally>()),
        (t("compare_store"), fields_of::<CompareQueue>()),
        (t("compare_store"), fields_of::<CompareGroup>()),
        (t("compare_store"), fields_of::<CompareReplica>()),
        (t("config_difference"), fields_of::<ConfigDifference>()),
        (sm("compare"), fields_of::<CompareSummary>()),
        (sm("compare"), fields_of::<CompareDivergence>()),
        (sm("compare"), fields_of::<CompareTruncation>()),
        (sm("compare"), fields_of::<CompareBelowDivide>()),
        (sm("compare"), fields_of::<CompareExport>()),
        (t("send"), fields_of::<SendLine>()),
        (t("send"), fields_of::<SendFound>()),
        (t("send"), fields_of::<SendDelay>()),
        (t("send_plan"), fields_of::<SendPlan>()),
        (t("send_plan"), fields_of::<SendRule>()),
        (sm("send"), fields_of::<SendSummary>()),
        (sm("send"), fields_of::<SendStopped>()),
        (sm("send"), fields_of::<SendTopic>()),
    ];
    let mut missing = Vec::new();
    for (heading, fields) in &sections {
        let text = section(&doc, heading);
        for f in *fields {
            if !text.contains(&format!("`{f}`")) {
                missing.push(format!("{heading}: `{f}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/json.md misses fields:\n{}",
        missing.join("\n")
    );
    // and every type and every summary has its section
    for kind in [
        "message",
        "unit",
        "index_header",
        "index_entry",
        "checkpoint",
        "config",
        "finding",
        "recovery",
        "info",
        "group",
        "delay_level",
        "transaction",
        "pull",
        "action",
        "trace",
        "timer_unit",
        "timer_slot",
        "timercheck",
        "timers",
        "dledger_info",
        "dledger_entry",
        "dledger_index",
        "compare_record",
        "compare_store",
        "config_difference",
        "send",
        "send_plan",
        "note",
        "error",
        "summary",
    ] {
        section(&doc, &t(kind));
    }
}

#[test]
fn without_json_the_summary_of_a_stream_is_a_text_line_on_stderr() {
    let store = fixture("store-4.9");
    for args in [
        vec!["dump", "commitlog", "--count", "3"],
        vec![
            "query",
            "--topic",
            "OrderTopic",
            "--queue",
            "0",
            "--offset",
            "0",
        ],
        vec![
            "pull",
            "--topic",
            "OrderTopic",
            "--group",
            "OrderGroup",
            "--queue",
            "0",
            "--from",
            "first",
        ],
    ] {
        let out = bin()
            .arg(args[0])
            .args(&args[1..])
            .arg(&store)
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            !stdout.lines().any(|l| l.starts_with("-- ")),
            "{args:?}: {stdout}"
        );
        assert!(stdout.lines().count() > 1, "{args:?}: no messages");
        assert!(
            stderr.lines().filter(|l| l.starts_with("-- ")).count() >= 1,
            "{args:?}: {stderr}"
        );
    }
}

/// With `--json`, `2>&1 | jq` reads everything: every line of stdout and stderr together is a
/// JSON line of the schema, notes (a limit reached, nothing found, a file written) and the
/// error of a run that could not go on included.
#[test]
fn with_json_stdout_and_stderr_together_are_json_lines() {
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("store");
    copy_tree(&fixture("store-4.9"), &store);
    let s = store.to_str().unwrap();
    let runs: Vec<(Vec<&str>, i32)> = vec![
        (vec!["dump", "commitlog", s, "--count", "3", "--json"], 0),
        (
            vec![
                "dump",
                "consumequeue",
                s,
                "-t",
                "OrderTopic",
                "--count",
                "2",
                "--json",
            ],
            0,
        ),
        (
            vec![
                "query",
                s,
                "-t",
                "OrderTopic",
                "-q",
                "0",
                "-o",
                "999999",
                "--json",
            ],
            1,
        ),
        (
            vec![
                "query",
                s,
                "-i",
                "C0A8000A00002A9F00000000FFFFFFFF",
                "--json",
            ],
            1,
        ),
        (
            vec!["query", s, "-t", "NoSuchTopic", "-k", "k", "--json"],
            2,
        ),
        (vec!["trace", s, "-k", "order-33", "--json"], 1),
        (vec!["info", s, "--json"], 0),
        (vec!["pending", s, "--json"], 0),
        (vec!["verify", s, "--json"], 0),
        (
            vec![
                "offsets",
                s,
                "set",
                "-g",
                "OrderGroup",
                "-t",
                "OrderTopic",
                "--to",
                "first",
                "--apply",
                "--json",
            ],
            0,
        ),
    ];
    for (args, want) in runs {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("\"$0\" \"$@\" 2>&1")
            .arg(env!("CARGO_BIN_EXE_rmqstore"))
            .args(&args)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let got = out.status.code().unwrap_or(-1);
        assert!(
            want == got || (want == 0 && got == 1),
            "{args:?}: exit {got}: {text}"
        );
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let lines: Vec<Line> = text.lines().map(|l| parse(l, &args, "2>&1")).collect();
        assert!(!lines.is_empty(), "{args:?}");
        if want == 2 {
            assert!(
                matches!(lines.last(), Some(Line::Error(_))),
                "{args:?}: {text}"
            );
        }
    }
}
