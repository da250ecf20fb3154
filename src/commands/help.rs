//! The text after each subcommand's `--help`: its exit statuses and a few examples. Every
//! example line (`  rmqstore ...`) is parsed by a test, so an example cannot name a flag that
//! does not exist. `~/store` is the broker's default `storePathRootDir`.

pub const GEN: &str = "\
Exit status: 0 the store was written; 2 could not run (the directory already holds a commitlog).

Examples:
  rmqstore gen /tmp/demo-store --messages 10000
  rmqstore gen /tmp/small --messages 500 --commitlog-file-size 262144 --json";

pub const DUMP: &str = "\
Exit status: 0 printed; 1 a file did not parse (said on stderr); 2 could not run.

Examples:
  rmqstore dump commitlog ~/store -t OrderTopic -c 20
  rmqstore dump consumequeue ~/store --topic OrderTopic --queue 0 --json
  rmqstore dump index ~/store --header-only";

pub const DUMP_COMMITLOG: &str = "\
Exit status: 0 printed; 1 a record did not parse (said on stderr); 2 could not run.

Examples:
  rmqstore dump commitlog ~/store -t OrderTopic -c 20
  rmqstore dump commitlog ~/store/commitlog/00000000000000000000 -J | jq .topic
  rmqstore dump commitlog ~/store -o 1073741824 -f '%O %t %q %o %k %s'";

pub const DUMP_CONSUMEQUEUE: &str = "\
Exit status: 0 printed; 1 a file did not parse (said on stderr); 2 could not run.

Examples:
  rmqstore dump consumequeue ~/store --topic OrderTopic
  rmqstore dump consumequeue ~/store -t OrderTopic --queue 0 --from 100 --count 10 --json";

pub const DUMP_INDEX: &str = "\
Exit status: 0 printed; 1 a file did not parse (said on stderr); 2 could not run.

Examples:
  rmqstore dump index ~/store --header-only
  rmqstore dump index ~/store/index/20261130101500123 --json";

pub const DUMP_CHECKPOINT: &str = "\
Exit status: 0 printed; 2 could not run (no checkpoint, or it does not parse).

Examples:
  rmqstore dump checkpoint ~/store
  rmqstore dump checkpoint ~/store --json";

pub const DUMP_TIMERLOG: &str = "\
Exit status: 0 printed; 1 the log holds bytes that are not a unit (said on stderr); 2 could not
run (no timerlog/).

Examples:
  rmqstore dump timerlog ~/store
  rmqstore dump timerlog ~/store --json | jq 'select(.roll)'";

pub const DUMP_TIMERWHEEL: &str = "\
Exit status: 0 printed; 2 could not run (no timerwheel, or not 38707200 bytes).

Examples:
  rmqstore dump timerwheel ~/store
  rmqstore dump timerwheel ~/store/timerwheel --json";

pub const DUMP_TIMERCHECK: &str = "\
Exit status: 0 printed; 2 could not run (no config/timercheck, or it is short).

Examples:
  rmqstore dump timercheck ~/store
  rmqstore dump timercheck ~/store/config/timercheck --json";

pub const DUMP_DLEDGER: &str = "\
Exit status: 0 printed; 1 the entries break their chain (index, term, position), the data stops
on bad bytes, or (--index) an index unit disagrees with its entry; 2 could not run (not a
DLedger-mode store).

Examples:
  rmqstore dump dledger ~/store
  rmqstore dump dledger ~/store --index --json";

pub const DUMP_CONFIG: &str = "\
Exit status: 0 printed; 1 a config file did not parse (said on stderr); 2 could not run.

Examples:
  rmqstore dump config ~/store
  rmqstore dump config ~/store --json";

pub const QUERY: &str = "\
Exit status: 0 messages found; 1 nothing found (also a well-formed message id the store does
not hold, as grep); 2 could not run (an unknown topic or queue, with the close names; a
malformed message id; a negative --offset).

Examples:
  rmqstore query ~/store -t OrderTopic -k order-33
  rmqstore query ~/store -i C0A8000A00002A9F00000000000090FC -J
  rmqstore query ~/store -t OrderTopic -q 0 -o 100 -c 10 -f '%o %k %T %s'
  rmqstore query ~/store -t OrderTopic --begin 2026-11-30T10:00:00Z --end 2026-11-30T11:00:00Z";

pub const INFO: &str = "\
Exit status: 0 printed; 2 could not run.

Examples:
  rmqstore info ~/store
  rmqstore info ~/store --json | jq '.topics[].topic'";

pub const PULL: &str = "\
Exit status: 0 messages returned; 1 none returned; 2 could not run (an unknown topic, or a
group the store does not know without --from or --offset, a --client-dir that is not a
<clientId>/<group> folder, a --group that is not its group).

Examples:
  rmqstore pull ~/store -g OrderGroup -t OrderTopic
  rmqstore pull ~/store -g NewGroup -t OrderTopic -q 0 --from first -f '%o %k %s'
  rmqstore pull ~/store -g OrderGroup -t OrderTopic --commit --overlay /tmp/overlay
  rmqstore pull ~/store --client-dir /tmp/o/10.0.0.5@DEFAULT/BcastGroup -t OrderTopic --commit";

pub const TRACE: &str = "\
Exit status: 0 traces found; 1 nothing traced (also when the store has no trace topic: tracing
was off, or --trace-topic names another); 2 could not run.

Examples:
  rmqstore trace ~/store -i 0A01001532055FFD2B270A8C3D1E0004
  rmqstore trace ~/store -k order-33 --json
  rmqstore trace ~/store -t OrderTopic --since 2026-11-30T10:00:00Z
  rmqstore trace ~/store -i C0A8000A00002A9F00000000000090FC --trace-topic MyTraceTopic";

pub const PENDING: &str = "\
Exit status: 0 printed; 2 could not run (an unknown group is an error, with the close names; a
--client-dir that is not a <clientId>/<group> folder, or whose offsets.json and .bak are broken).

Examples:
  rmqstore pending ~/store
  rmqstore pending ~/store -g OrderGroup --json
  rmqstore pending ~/store --now 2026-11-30T12:00:00Z --all
  rmqstore pending ~/store --client-dir ~/.rocketmq_offsets/10.0.0.5@DEFAULT/BcastGroup";

pub const REBUILD: &str = "\
Exit status: 0 rebuilt; 1 refused, nothing written, with --out as with --in-place (the
commitlog is damaged before records that exist: see verify and repair; --force rebuilds
anyway); 2 could not run.

Examples:
  rmqstore rebuild ~/store --out /tmp/rebuilt
  rmqstore rebuild ~/store --index --in-place
  rmqstore rebuild ~/store --consumequeue --topic OrderTopic --out /tmp/rebuilt";

pub const REPAIR: &str = "\
Exit status: 0 the plan was printed (--dry-run), or the store was repaired and the result
verifies clean; 1 the repaired copy does not verify clean (it was not switched in); 2 could
not run (a live broker holds the lock, the output is inside a store).

Examples:
  rmqstore repair ~/store --dry-run
  rmqstore repair ~/store --out /tmp/repaired
  rmqstore repair ~/store --in-place";

pub const EXPORT: &str = "\
Exit status: 0 exported (also when nothing was pending); 1 exported, but the group consumes by
POP (5.x) or the store holds POP revive records, so popped, unacknowledged messages may be
missing (said on stderr; --accept-pop-gap makes it 0); 2 could not run (an existing FILE.jsonl
is refused without --force).

Examples:
  rmqstore export ~/store -g OrderGroup --out /tmp/order.jsonl
  rmqstore export ~/store -g OrderGroup --include retry,delayed,dlq --dedupe --out /tmp/order.jsonl
  rmqstore export ~/store -g OrderGroup --out /tmp/new-store
  rmqstore export ~/store --client-dir /tmp/o/10.0.0.5@DEFAULT/BcastGroup --out /tmp/b.jsonl

The way back into a cluster: rmqstore send /tmp/order.jsonl --namesrv HOST:9876 (or send the
store directly: rmqstore send ~/store -g OrderGroup --namesrv HOST:9876).";

pub const SEND: &str = "\
Exit status: 0 everything selected was sent (undecided transactions are listed, not sent); 1
some messages were refused, stored without SEND_OK, left in doubt by a failed batch, damaged in
the source (a body that fails its CRC is never sent), or the source could not be read to its end
(each listed); 2 could not run (a topic the cluster lacks, a
journal of another source or target), stopped by a failure, or interrupted. Run the same command
again to send the rest: the journal skips every message the cluster acknowledged.

Each message keeps its body (compressed ones with their compression bits), flag, born time,
UNIQ_KEY, keys, tags and properties, its queue (when the target topic has the source's queue
count) and what remains of its delay; %RETRY%/%DLQ% copies go to their original topic
(--keep-retry-topics keeps them). The source is only read.

Examples:
  rmqstore send ~/store.repaired/repair-20261130-101500/salvaged --namesrv 10.0.0.5:9876
  rmqstore send ~/store -g OrderGroup --include retry,delayed --namesrv 10.0.0.5:9876 --dry-run
  rmqstore send /tmp/order.jsonl --broker 10.0.0.7:10911 --create-topics --rate 5000/s
  rmqstore send ~/store -t OrderTopic --topic-map OrderTopic=OrderTopicRestored --mark RECOVERED=broker-a --namesrv 10.0.0.5:9876 --json";

pub const COMPARE: &str = "\
Exit status: 0 nothing would be lost; 1 records would be lost (on a store that does not carry on,
or on a DLedger replica that raft truncates, and on no store that keeps them); 2 could not run
(fewer than two stores, one store given twice, stores of different brokers or clusters, a DLedger
store with a normal one; --force compares one store twice, or two brokers' stores, anyway).

In normal mode the store that carries on is --keep N, else the one whose log every other extends
(the slave of an asynchronous pair), else, where the logs diverged, the one written last. In a
DLedger group raft elects the replica whose last entry has the highest term, then index.

Examples:
  rmqstore compare /data/master/store /data/slave/store
  rmqstore compare /data/master/store /data/slave/store --export /tmp/lost.jsonl
  rmqstore compare /data/n0/store /data/n1/store /data/n2/store --json
  rmqstore compare /data/master/store /data/slave/store --keep 1 --export /tmp/lost-store";

pub const REPLAY: &str = "\
Exit status: 0 the run ended; 1 every message delivered failed and went to the DLQ; 2 could
not run (or the command could not be started).

Examples:
  rmqstore replay ~/store -g OrderGroup --exec 'jq -c .body >> /tmp/bodies' --until-idle
  rmqstore replay ~/store -g OrderGroup -t OrderTopic --exec ./consume.sh --overlay /tmp/ov
  rmqstore replay ~/store -g OrderGroup --exec 'cat > /dev/null' --time-scale 1000 --until-idle
  rmqstore replay ~/store --client-dir /tmp/o/10.0.0.5@DEFAULT/BcastGroup --exec ./consume.sh";

pub const OFFSETS: &str = "\
Exit status: 0 shown, planned or written; 2 could not run (an unknown group or topic, a live
broker holding the store's lock; with --client-dir: a folder that is not <clientId>/<group>, a
--group that is not its group, an offsets.json whose .bak is broken too, a symlink in its place).

With --client-dir DIR (DIR = <localOffsetStoreDir>/<clientId>/<group>, e.g.
~/.rocketmq_offsets/10.0.0.5@DEFAULT/BcastGroup: the group is DIR's last name, the client id
the one before), show and set work on a broadcasting consumer's DIR/offsets.json instead of
config/consumerOffset.json; set --apply writes it as the client does (merged into what the file
holds, the old file kept as .bak and a dated copy, written to .tmp, fsynced, renamed). The store
is only read. --broker-name names the store's broker in the file (default: broker-a).

Examples:
  rmqstore offsets ~/store show -g OrderGroup
  rmqstore offsets ~/store set -g OrderGroup -t OrderTopic --to-time 2026-11-30T10:00:00Z
  rmqstore offsets ~/store set -g OrderGroup -t OrderTopic --to first --apply
  rmqstore offsets ~/store clone --from OrderGroup --to OrderGroupReplay --apply
  rmqstore offsets ~/store --client-dir ~/.rocketmq_offsets/10.0.0.5@DEFAULT/BcastGroup show
  rmqstore offsets ~/store --client-dir /tmp/o/10.0.0.5@DEFAULT/G set -t OrderTopic --to last --apply";

pub const CONFIG: &str = "\
Exit status: 0 shown, planned or written; 2 could not run (an unknown property or entry, a
value the broker would not take, a live broker holding the store's lock).

Examples:
  rmqstore config ~/store topics show
  rmqstore config ~/store topics set OrderTopic readQueueNums=8 writeQueueNums=8 --apply
  rmqstore config ~/store groups set OrderGroup retryMaxTimes=3 consumeEnable=false
  rmqstore config ~/store groups delete OldGroup --apply";

pub const VERIFY: &str = "\
Exit status: 0 healthy, or warnings only; 1 errors (with --strict, warnings too; with
--explain-recovery, the next start would lose data or refuse to start); 2 could not run (a
folder holding .rmqstore-stage, a writer's unfinished output, is refused).

Examples:
  rmqstore verify ~/store
  rmqstore verify ~/store --json --explain-recovery
  rmqstore verify ~/store --only commitlog --no-crc";

pub const COMPLETIONS: &str = "\
Exit status: 0 printed (a closed pipe too); 2 could not run (a shell it does not know, or the
script could not be written).

Examples:
  rmqstore completions bash > ~/.local/share/bash-completion/completions/rmqstore
  rmqstore completions zsh > ~/.zfunc/_rmqstore";

pub const MAN: &str = "\
Exit status: 0 printed (a closed pipe too); 2 could not run (the page could not be written).

Examples:
  rmqstore man | man -l -
  rmqstore man > rmqstore.1";

/// Every text, for the test that parses their examples.
pub const ALL: &[&str] = &[
    GEN,
    DUMP,
    DUMP_COMMITLOG,
    DUMP_CONSUMEQUEUE,
    DUMP_INDEX,
    DUMP_CHECKPOINT,
    DUMP_CONFIG,
    DUMP_TIMERLOG,
    DUMP_TIMERWHEEL,
    DUMP_TIMERCHECK,
    DUMP_DLEDGER,
    QUERY,
    INFO,
    PULL,
    TRACE,
    PENDING,
    REBUILD,
    REPAIR,
    EXPORT,
    COMPARE,
    REPLAY,
    OFFSETS,
    CONFIG,
    VERIFY,
    COMPLETIONS,
    MAN,
    SERVE,
    ROOT,
    TUI,
    OFFSETS_SHOW,
    OFFSETS_SET,
    OFFSETS_CLONE,
    OFFSETS_DELETE,
    CONFIG_TOPICS,
    CONFIG_GROUPS,
    CONFIG_SHOW,
    CONFIG_SET,
    CONFIG_DELETE,
];

/// The example command lines of `text`, split into words as a shell would (single quotes only).
pub fn examples(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter_map(|l| l.strip_prefix("  rmqstore "))
        .map(|l| {
            let command = l.split(" |").next().unwrap_or(l);
            let command = command.split(" >").next().unwrap_or(command);
            let mut words = vec!["rmqstore".to_string()];
            let mut word = String::new();
            let mut quoted = false;
            let mut any = false;
            for c in command.chars() {
                match c {
                    '\'' => {
                        quoted = !quoted;
                        any = true;
                    }
                    ' ' if !quoted => {
                        if any {
                            words.push(std::mem::take(&mut word));
                            any = false;
                        }
                    }
                    c => {
                        word.push(c);
                        any = true;
                    }
                }
            }
            if any {
                words.push(word);
            }
            words
        })
        .collect()
}

pub const SERVE: &str = "\
Exit status: 0 stopped by Ctrl-C or SIGTERM after writing the overlay (offsets, retries, dead
letters); 2 could not run (the store cannot be opened, the address is taken, a non-loopback
--listen without --acl, an unreadable ACL file).

Examples:
  rmqstore serve ~/store --overlay /tmp/ov
  rmqstore serve ~/store --overlay /tmp/ov --listen 0.0.0.0:9876 --acl conf/plain_acl.yml
  rmqstore serve ~/store --overlay /tmp/ov --time-scale 60
then, from another terminal (retries fall due 60 times sooner with --time-scale 60):
  mqadmin consumerProgress -n 127.0.0.1:9876 -g OrderGroup";

pub const ROOT: &str = "\
Exit status: 0 success (a healthy store; something found, printed or done); 1 problems found, or
nothing found (each command's --help says which); 2 could not run (bad arguments, a path that
is not a store, a live broker holding the lock).

Examples:
  rmqstore info ~/store
  rmqstore verify ~/store
  rmqstore query ~/store -t OrderTopic -k order-33
  rmqstore pending ~/store -g OrderGroup";

pub const TUI: &str = "\
Exit status: 0 the browser was closed; 2 could not run (standard input or output is not a
terminal, the store cannot be opened).

Examples:
  rmqstore tui ~/store
  rmqstore tui ~/store --trace-topic MyTraceTopic

Nothing is written into the store. Times are shown and read in UTC; a time typed with an offset
(2026-11-30T18:15:00+08:00) or as epoch milliseconds is read as such.

Keys (? in the browser lists them all): f filters a queue's messages (TagA || TagB, key:K,
prop:NAME=VALUE, body:TEXT), / filters any list as you type, s sorts, F finds a message by key
or id, g goes to a queue offset or a time, n/N step through messages, o opens the origin of a
%RETRY% or %DLQ% copy, c/C copy the id/body (OSC 52), p shows the body in $PAGER.";

pub const OFFSETS_SHOW: &str = "\
Exit status: 0 shown; 2 could not run (an unknown group or topic; with --client-dir: a folder
that is not <clientId>/<group>, an offsets.json whose .bak is broken too).

Examples:
  rmqstore offsets ~/store show -g OrderGroup
  rmqstore offsets ~/store show -t OrderTopic --json
  rmqstore offsets ~/store --client-dir ~/.rocketmq_offsets/10.0.0.5@DEFAULT/BcastGroup show";

pub const OFFSETS_SET: &str = "\
Exit status: 0 planned, or written with --apply; 2 could not run (an unknown group or topic, a
negative --to-offset, a live broker holding the store's lock).

Examples:
  rmqstore offsets ~/store set -g OrderGroup -t OrderTopic --to-offset 100
  rmqstore offsets ~/store set -g OrderGroup -t OrderTopic --to-time 2026-11-30T10:00:00Z
  rmqstore offsets ~/store set -g OrderGroup -t OrderTopic -q 0 --to first --apply";

pub const OFFSETS_CLONE: &str = "\
Exit status: 0 planned, or written with --apply; 2 could not run (an unknown group or topic, a
live broker holding the store's lock).

Examples:
  rmqstore offsets ~/store clone --from OrderGroup --to OrderGroupReplay
  rmqstore offsets ~/store clone --from OrderGroup --to OrderGroupReplay -t OrderTopic --apply";

pub const OFFSETS_DELETE: &str = "\
Exit status: 0 planned, or written with --apply; 2 could not run (an unknown group or topic, a
live broker holding the store's lock).

Examples:
  rmqstore offsets ~/store delete -g OldGroup
  rmqstore offsets ~/store delete -g OldGroup -t OrderTopic --apply";

pub const CONFIG_TOPICS: &str = "\
Exit status: 0 shown, planned or written; 2 could not run (an unknown property or topic, a value
the broker would not take, a live broker holding the store's lock).

Examples:
  rmqstore config ~/store topics show
  rmqstore config ~/store topics set OrderTopic readQueueNums=8 writeQueueNums=8 --apply";

pub const CONFIG_GROUPS: &str = "\
Exit status: 0 shown, planned or written; 2 could not run (an unknown property or group, a value
the broker would not take, a live broker holding the store's lock).

Examples:
  rmqstore config ~/store groups show --json
  rmqstore config ~/store groups set OrderGroup retryMaxTimes=3 consumeEnable=false";

pub const CONFIG_SHOW: &str = "\
Exit status: 0 shown; 2 could not run (the config file does not parse, nor its .bak).

Examples:
  rmqstore config ~/store topics show
  rmqstore config ~/store groups show --json";

pub const CONFIG_SET: &str = "\
Exit status: 0 planned, or written with --apply; 2 could not run (an unknown property, a value
the broker would not take, a live broker holding the store's lock).

Examples:
  rmqstore config ~/store topics set OrderTopic readQueueNums=8 writeQueueNums=8
  rmqstore config ~/store groups set OrderGroup retryMaxTimes=3 --apply";

pub const CONFIG_DELETE: &str = "\
Exit status: 0 planned, or written with --apply; 2 could not run (an unknown entry, a live broker
holding the store's lock).

Examples:
  rmqstore config ~/store topics delete OldTopic
  rmqstore config ~/store groups delete OldGroup --apply";

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn every_example_parses() {
        let mut n = 0;
        for text in ALL {
            let ex = examples(text);
            assert!(ex.len() >= 2, "fewer than two examples in {text}");
            assert!(text.starts_with("Exit status: "), "{text}");
            for words in ex {
                if let Err(e) = super::super::Cli::try_parse_from(&words) {
                    panic!("{words:?} does not parse: {e}");
                }
                n += 1;
            }
        }
        assert!(n >= 30, "{n}");
    }

    /// Every page of the command tree (the root and every subcommand at every level) states
    /// its exit statuses and gives an example of that very command.
    #[test]
    fn every_page_has_exit_statuses_and_an_example() {
        fn walk(cmd: &clap::Command, path: &mut Vec<String>, pages: &mut usize) {
            let shown = format!("rmqstore {}--help", path.join(" ") + " ");
            let text = cmd
                .get_after_help()
                .map(|t| t.to_string())
                .unwrap_or_default();
            assert!(text.starts_with("Exit status: "), "{shown}: {text:?}");
            let mine: Vec<_> = examples(&text)
                .into_iter()
                .filter(|w| {
                    let mut rest = w.iter().skip(1);
                    path.iter().all(|p| rest.any(|x| x == p))
                })
                .collect();
            assert!(!mine.is_empty(), "{shown}: no example of this command");
            *pages += 1;
            for sub in cmd.get_subcommands() {
                path.push(sub.get_name().to_string());
                walk(sub, path, pages);
                path.pop();
            }
        }
        let mut pages = 0;
        walk(
            &<super::super::Cli as clap::CommandFactory>::command(),
            &mut Vec::new(),
            &mut pages,
        );
        assert!(pages >= 35, "{pages}");
    }

    #[test]
    fn examples_are_split_as_a_shell_would() {
        assert_eq!(
            examples("  rmqstore query s -f '%o %k' | head\n"),
            vec![vec!["rmqstore", "query", "s", "-f", "%o %k"]]
        );
    }
}
