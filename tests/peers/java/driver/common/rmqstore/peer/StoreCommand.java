package rmqstore.peer;

import io.openmessaging.storage.dledger.DLedgerServer;
import io.openmessaging.storage.dledger.store.DLedgerStore;
import io.openmessaging.storage.dledger.store.file.DLedgerMmapFileStore;
import io.openmessaging.storage.dledger.store.file.MmapFileList;
import java.io.File;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.GetMessageStatus;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.config.BrokerRole;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.dledger.DLedgerCommitLog;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * store: opens a store directory with the real DefaultMessageStore as a broker does and
 * reports what the Java store sees. Without --shutdown the process halts afterwards, so the
 * store writes nothing back on close (start() itself still recovers, dispatches and may
 * create files, as a broker's start would).
 */
final class StoreCommand {
    private static final String[] VALUED = {
        "dir", "commitlog-file-size", "cq-file-units", "index-slots", "index-entries", "key",
        "dledger-group", "dledger-self-id", "dledger-peers", "dledger-index-file-size", "wait-ms",
        "group", "query-max", "broker-name", "ha-port",
    };
    private static final String[] BOOLS = {"messages", "shutdown"};

    /** Size of one consume queue unit. */
    private static final int CQ_UNIT = 20;
    /** DLedger's default index file size (DLedgerConfig.mappedFileSizeForEntryIndex). */
    private static final long DLEDGER_DEFAULT_INDEX_FILE = 32L * 5 * 1024 * 1024;

    private StoreCommand() {
    }

    static int run(String[] argv) throws Exception {
        Args a = Args.parse(argv, 1, VALUED, BOOLS);
        File dir = new File(a.need("dir")).getAbsoluteFile();
        if (!dir.isDirectory()) {
            throw new UsageException("--dir " + dir + " is not a directory");
        }
        long waitMs = a.num("wait-ms", 30000);
        String group = a.str("group", "rmqstore-peer");
        int queryMax = a.integer("query-max", 64);
        List<String[]> keys = new ArrayList<>();
        for (String k : a.all("key")) {
            int eq = k.indexOf('=');
            if (eq <= 0) {
                throw new UsageException("--key wants TOPIC=KEY, not '" + k + "'");
            }
            keys.add(new String[] {k.substring(0, eq), k.substring(eq + 1)});
        }

        // the broker defaults unless the geometry is given
        MessageStoreConfig msc = new MessageStoreConfig();
        msc.setStorePathRootDir(dir.getPath());
        msc.setStorePathCommitLog(dir.getPath() + File.separator + "commitlog");
        msc.setMappedFileSizeCommitLog(a.integer("commitlog-file-size", 1024 * 1024 * 1024));
        msc.setMappedFileSizeConsumeQueue(a.integer("cq-file-units", 300000) * CQ_UNIT);
        msc.setMaxHashSlotNum(a.integer("index-slots", 5000000));
        msc.setMaxIndexNum(a.integer("index-entries", 5000000 * 4));
        // a slave: no delayed-message delivery, no writes of its own
        msc.setBrokerRole(BrokerRole.SLAVE);
        // start() listens for HA slaves: on a port of the caller's choosing, so that stores
        // opened side by side do not collide on the default 10912
        msc.setHaListenPort(a.integer("ha-port", 10912));

        boolean dledger = a.has("dledger-group") || a.has("dledger-self-id") || a.has("dledger-peers");
        if (dledger) {
            msc.setEnableDLegerCommitLog(true);
            msc.setdLegerGroup(a.need("dledger-group"));
            msc.setdLegerSelfId(a.need("dledger-self-id"));
            msc.setdLegerPeers(a.need("dledger-peers"));
        }

        BrokerConfig bc = new BrokerConfig();
        bc.setBrokerName(a.str("broker-name", "broker-a"));
        BrokerStatsManager stats = new BrokerStatsManager(bc.getBrokerClusterName(), true);

        boolean abortBefore = new File(dir, "abort").exists();
        DefaultMessageStore store = Driver.COMPAT.newStore(msc, stats, bc, dir);

        Long indexFileSize = null;
        if (dledger) {
            indexFileSize = dledgerIndexFileSize(a, dir, msc.getdLegerSelfId());
            if (indexFileSize != null) {
                setDLedgerIndexFileSize(store, indexFileSize.intValue());
            }
        }

        long t0 = System.nanoTime();
        boolean ok;
        String loadError = null;
        try {
            ok = store.load();
        } catch (Throwable t) {
            ok = false;
            loadError = Out.describe(t);
        }
        long loadMillis = (System.nanoTime() - t0) / 1_000_000;
        Out.emit(Json.obj("load").put("ok", ok).put("abortBefore", abortBefore).put("millis", loadMillis)
            .opt("dledgerIndexFileSize", indexFileSize));
        if (!ok) {
            Out.error("load", loadError != null ? loadError : "load() returned false", null);
        }

        boolean started = false;
        boolean caughtUp = false;
        Json.Obj dl = null;
        if (ok) {
            try {
                store.start();
                started = true;
            } catch (Throwable t) {
                Out.error("start", t);
            }
        }
        if (started) {
            long deadline = System.currentTimeMillis() + waitMs;
            if (dledger) {
                dl = waitLeader(store, deadline);
            }
            caughtUp = waitDispatch(store, deadline);
        }

        Json.Obj st = Json.obj("store");
        try {
            st.put("minPhyOffset", store.getMinPhyOffset())
                .put("maxPhyOffset", store.getMaxPhyOffset())
                .put("confirmOffset", store.getConfirmOffset())
                .put("dispatchBehindBytes", started ? store.dispatchBehindBytes() : null)
                .put("caughtUp", caughtUp)
                .put("started", started)
                .opt("dledger", dl);
        } catch (Throwable t) {
            Out.error("store", t);
        }
        Out.emit(st);

        TreeMap<String, TreeSet<Integer>> queues = queues(store);
        int queueCount = 0;
        int messages = 0;
        for (Map.Entry<String, TreeSet<Integer>> e : queues.entrySet()) {
            for (int qid : e.getValue()) {
                queueCount++;
                long min = store.getMinOffsetInQueue(e.getKey(), qid);
                long max;
                try {
                    max = store.getMaxOffsetInQueue(e.getKey(), qid);
                } catch (Exception ex) {
                    Out.error("queue", ex);
                    continue;
                }
                // files: consume queue files on disk; the table also holds queues that only
                // exist in memory (4.9 creates all 18 SCHEDULE_TOPIC_XXXX queues at load)
                File[] cqFiles = new File(new File(new File(dir, "consumequeue"), e.getKey()),
                    Integer.toString(qid)).listFiles();
                Out.emit(Json.obj("queue").put("topic", e.getKey()).put("queueId", qid)
                    .put("minOffsetInQueue", min).put("maxOffsetInQueue", max)
                    .put("files", cqFiles == null ? 0 : cqFiles.length));
            }
        }

        if (a.has("messages")) {
            for (Map.Entry<String, TreeSet<Integer>> e : queues.entrySet()) {
                for (int qid : e.getValue()) {
                    messages += dumpQueue(store, group, e.getKey(), qid);
                }
            }
        }

        for (String[] k : keys) {
            query(store, k[0], k[1], queryMax);
        }

        if (a.has("shutdown")) {
            try {
                store.shutdown();
            } catch (Throwable t) {
                Out.error("shutdown", t);
            }
        }
        Out.emit(Json.obj("summary").put("queues", queueCount).put("messages", messages)
            .put("errors", Out.errors()));
        return Out.errors() > 0 ? 1 : 0;
    }

    /** Consume queues of the store's table, sorted by topic and then numerically by queue id. */
    private static TreeMap<String, TreeSet<Integer>> queues(DefaultMessageStore store) {
        TreeMap<String, TreeSet<Integer>> out = new TreeMap<>();
        Map<String, ? extends Map<Integer, ?>> table = store.getConsumeQueueTable();
        for (Map.Entry<String, ? extends Map<Integer, ?>> e : table.entrySet()) {
            out.put(e.getKey(), new TreeSet<>(e.getValue().keySet()));
        }
        return out;
    }

    private static int dumpQueue(DefaultMessageStore store, String group, String topic, int qid) {
        long min = store.getMinOffsetInQueue(topic, qid);
        long max;
        try {
            max = store.getMaxOffsetInQueue(topic, qid);
        } catch (Exception e) {
            Out.error("get", e);
            return 0;
        }
        int found = 0;
        for (long off = min; off < max; off++) {
            GetMessageResult r = null;
            try {
                r = store.getMessage(group, topic, qid, off, 1, null);
                if (r == null) {
                    Out.error("get", "getMessage returned null", Json.obj().put("topic", topic)
                        .put("queueId", qid).put("offset", off));
                    continue;
                }
                List<ByteBuffer> bufs = r.getMessageBufferList();
                if (r.getStatus() == GetMessageStatus.FOUND && bufs != null && !bufs.isEmpty()) {
                    // readBody=true, deCompressBody=false: the body as stored
                    MessageExt m = MessageDecoder.decode(bufs.get(0), true, false);
                    if (m == null) {
                        // a unit that points at no message (zeros kept by recovery): FOUND, nothing in it
                        Out.emit(Json.obj("get").put("topic", topic).put("queueId", qid).put("offset", off)
                            .put("status", r.getStatus()).put("noMessage", true)
                            .put("bufferBytes", bufs.get(0).remaining()));
                        continue;
                    }
                    Json.Obj o = Json.obj("message").put("cqOffset", off);
                    Msgs.stored(o, m);
                    o.opt("tagsCode", Driver.COMPAT.tagsCode(store, topic, qid, off));
                    Out.emit(o);
                    found++;
                } else {
                    Out.emit(Json.obj("get").put("topic", topic).put("queueId", qid).put("offset", off)
                        .put("status", r.getStatus()).put("nextBeginOffset", r.getNextBeginOffset())
                        .put("minOffset", r.getMinOffset()).put("maxOffset", r.getMaxOffset()));
                }
            } catch (Throwable t) {
                Out.error("get", Out.describe(t), Json.obj().put("topic", topic).put("queueId", qid)
                    .put("offset", off));
            } finally {
                if (r != null) {
                    r.release();
                }
            }
        }
        return found;
    }

    private static void query(DefaultMessageStore store, String topic, String key, int max) {
        QueryMessageResult r = null;
        try {
            r = store.queryMessage(topic, key, max, 0, Long.MAX_VALUE);
            List<Long> offsets = new ArrayList<>();
            if (r != null && r.getMessageBufferList() != null) {
                for (ByteBuffer b : r.getMessageBufferList()) {
                    offsets.add(MessageDecoder.decode(b, false, false).getCommitLogOffset());
                }
            }
            Out.emit(Json.obj("query").put("topic", topic).put("key", key).put("physicalOffsets", offsets)
                .put("indexLastUpdateTimestamp", r == null ? null : r.getIndexLastUpdateTimestamp())
                .put("indexLastUpdatePhyoffset", r == null ? null : r.getIndexLastUpdatePhyoffset()));
        } catch (Throwable t) {
            Out.error("query", Out.describe(t), Json.obj().put("topic", topic).put("key", key));
        } finally {
            if (r != null) {
                r.release();
            }
        }
    }

    private static boolean waitDispatch(DefaultMessageStore store, long deadline) {
        while (true) {
            if (store.dispatchBehindBytes() == 0) {
                return true;
            }
            if (System.currentTimeMillis() >= deadline) {
                return false;
            }
            Util.sleep(10);
        }
    }

    /** DLedger mode: waits until this member leads and everything in its ledger is committed. */
    private static Json.Obj waitLeader(DefaultMessageStore store, long deadline) {
        DLedgerServer server = ((DLedgerCommitLog) store.getCommitLog()).getdLedgerServer();
        DLedgerStore ds = server.getdLedgerStore();
        while (true) {
            boolean leader = server.getMemberState().isLeader();
            boolean committed = ds.getCommittedIndex() == ds.getLedgerEndIndex();
            if ((leader && committed) || System.currentTimeMillis() >= deadline) {
                return Json.obj().put("leader", leader).put("committed", committed)
                    .put("term", server.getMemberState().currTerm())
                    .put("committedIndex", ds.getCommittedIndex())
                    .put("ledgerEndIndex", ds.getLedgerEndIndex())
                    .put("ledgerBeginIndex", ds.getLedgerBeginIndex());
            }
            Util.sleep(10);
        }
    }

    /**
     * DLedger keeps no record of its index file size and RocketMQ offers no setting for it: take
     * --dledger-index-file-size, else the length of the first index file when it differs from
     * DLedger's default, else the default (null).
     */
    private static Long dledgerIndexFileSize(Args a, File dir, String selfId) throws UsageException {
        if (a.has("dledger-index-file-size")) {
            return a.num("dledger-index-file-size", 0);
        }
        File[] files = new File(new File(dir, "dledger-" + selfId), "index").listFiles();
        if (files == null || files.length == 0) {
            return null;
        }
        java.util.Arrays.sort(files);
        long len = files[0].length();
        return len > 0 && len != DLEDGER_DEFAULT_INDEX_FILE ? len : null;
    }

    /** Swaps the DLedger index file list for one with the given file size, before load(). */
    private static void setDLedgerIndexFileSize(DefaultMessageStore store, int size) throws Exception {
        DLedgerServer server = ((DLedgerCommitLog) store.getCommitLog()).getdLedgerServer();
        server.getdLedgerConfig().setMappedFileSizeForEntryIndex(size);
        DLedgerMmapFileStore fs = (DLedgerMmapFileStore) server.getdLedgerStore();
        Field f = DLedgerMmapFileStore.class.getDeclaredField("indexFileList");
        f.setAccessible(true);
        f.set(fs, new MmapFileList(server.getdLedgerConfig().getIndexStorePath(), size));
    }
}
