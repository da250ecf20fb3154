package rmqstore.peer;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * produce: sends deterministic messages with the remoting DefaultMQProducer.
 * Message i: tag tags[i % n] (none by default), KEYS prefix+i, user property seq=i plus --prop,
 * body "rmqstore message i" padded with 'x' to --size bytes.
 */
final class ProduceCommand {
    private static final String[] VALUED = {
        "namesrv", "topic", "count", "group", "size", "batch", "threads", "tags", "keys-prefix", "prop",
        "delay-level", "start", "timeout-ms", "fail-pause-ms",
    };
    private static final String[] BOOLS = {"keep-going"};

    private ProduceCommand() {
    }

    static int run(String[] argv) throws Exception {
        Args a = Args.parse(argv, 1, VALUED, BOOLS);
        final String namesrv = a.need("namesrv");
        final String topic = a.need("topic");
        final long count = a.num("count", -1);
        if (count < 0) {
            throw new UsageException("--count is required");
        }
        final String group = a.str("group", "rmqstore-peer-producer");
        final int size = a.integer("size", 128);
        final int batch = Math.max(1, a.integer("batch", 1));
        final int threads = Math.max(1, a.integer("threads", 1));
        final String tagList = a.str("tags", "");
        final String[] tags = tagList.isEmpty() ? new String[0] : tagList.split(",");
        final String keysPrefix = a.str("keys-prefix", "k-");
        final List<String[]> props = a.pairs("prop");
        final int delayLevel = a.integer("delay-level", 0);
        final long start = a.num("start", 0);
        final boolean keepGoing = a.has("keep-going");
        // with --keep-going: pause after a failed send, so that a dead broker does not burn
        // through all messages (and fill the client log) in a second
        final long failPauseMs = a.num("fail-pause-ms", 0);
        if (batch > 1 && delayLevel > 0) {
            throw new UsageException("--delay-level cannot be combined with --batch (batches carry no delay)");
        }

        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("rmqstore-peer-" + ProcessHandle.current().pid());
        producer.setSendMsgTimeout(a.integer("timeout-ms", 15000));
        producer.start();

        final AtomicLong sent = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final AtomicBoolean stop = new AtomicBoolean();
        long t0 = System.currentTimeMillis();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final long from = start + count * t / threads;
            final long to = start + count * (t + 1) / threads;
            Thread w = new Thread(() -> {
                long i = from;
                while (i < to && !stop.get()) {
                    long n = Math.min(batch, to - i);
                    List<Message> msgs = new ArrayList<>();
                    for (long j = 0; j < n; j++) {
                        long seq = i + j;
                        Message m = new Message(topic, Util.body(seq, size));
                        if (tags.length > 0) {
                            m.setTags(tags[(int) (seq % tags.length)]);
                        }
                        m.setKeys(keysPrefix + seq);
                        m.putUserProperty("seq", Long.toString(seq));
                        for (String[] p : props) {
                            m.putUserProperty(p[0], p[1]);
                        }
                        if (delayLevel > 0) {
                            m.setDelayTimeLevel(delayLevel);
                        }
                        msgs.add(m);
                    }
                    try {
                        SendResult r = batch > 1 ? producer.send(msgs) : producer.send(msgs.get(0));
                        report(i, n, r);
                        sent.addAndGet(n);
                    } catch (Throwable e) {
                        String err = Out.describe(e);
                        List<Json.Obj> lines = new ArrayList<>();
                        for (long j = 0; j < n; j++) {
                            lines.add(Json.obj("failed").put("i", i + j).put("error", err));
                        }
                        Out.emitAll(lines);
                        failed.addAndGet(n);
                        if (!keepGoing) {
                            stop.set(true);
                        } else if (failPauseMs > 0) {
                            Util.sleep(failPauseMs);
                        }
                    }
                    i += n;
                }
            }, "producer-" + t);
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            w.join();
        }
        long millis = System.currentTimeMillis() - t0;
        producer.shutdown();
        if (failed.get() > 0 && !keepGoing) {
            Out.error("send", "stopped at the first failed send (" + sent.get() + " sent)", null);
            return 1;
        }
        Out.emit(Json.obj("summary").put("sent", sent.get()).put("failed", failed.get()).put("millis", millis)
            .put("errors", Out.errors()));
        return Out.errors() > 0 ? 1 : 0;
    }

    /** One "sent" line per message; a batch's result carries comma-joined ids. */
    private static void report(long first, long n, SendResult r) {
        String[] ids = split(r.getMsgId(), n);
        String[] offsetIds = split(r.getOffsetMsgId(), n);
        List<Json.Obj> lines = new ArrayList<>();
        for (int j = 0; j < n; j++) {
            lines.add(Json.obj("sent").put("i", first + j).put("msgId", ids[j]).put("offsetMsgId", offsetIds[j])
                .put("queueId", r.getMessageQueue().getQueueId())
                .put("queueOffset", r.getQueueOffset() + j)
                .put("status", r.getSendStatus())
                .put("brokerName", r.getMessageQueue().getBrokerName()));
        }
        Out.emitAll(lines);
    }

    private static String[] split(String s, long n) {
        String[] out = new String[(int) n];
        String[] parts = s == null ? new String[0] : s.split(",");
        for (int j = 0; j < n; j++) {
            out[j] = j < parts.length ? parts[j] : null;
        }
        return out;
    }
}
