package rmqstore.peer;

import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * consume: drains a topic from its first offset with the real remoting consumer of a mode
 * (push, orderly, litepull, pop) and prints every delivery.
 *
 * --fail-mod M makes the first delivery of each message with queueOffset % M == 3 % M fail
 * (RECONSUME_LATER, or SUSPEND_CURRENT_QUEUE_A_MOMENT when orderly), and every redelivery of
 * it too, so it goes through the retries to the DLQ after --max-reconsume (push and orderly;
 * in pop mode the remoting client only delays it again, it never sends it to a DLQ).
 * A message is "settled" once a delivery succeeded or once a failing delivery had
 * reconsumeTimes >= --max-reconsume (the client hands it to the DLQ). --expect N stops when N
 * distinct messages are settled.
 */
final class ConsumeCommand {
    private static final String[] VALUED = {
        "namesrv", "group", "topic", "mode", "sub", "sql", "expect", "idle-ms", "start-ms", "fail-mod",
        "max-reconsume", "threads", "retry-delay-level", "suspend-ms", "pop-share-queues", "route-poll-ms",
    };
    private static final String[] BOOLS = {"broadcast"};

    private final ConcurrentHashMap<String, Integer> deliveries = new ConcurrentHashMap<>();
    private final Set<String> failing = ConcurrentHashMap.newKeySet();
    private final Set<String> settled = ConcurrentHashMap.newKeySet();
    private final ConcurrentHashMap<String, Long> lastOffset = new ConcurrentHashMap<>();
    private final AtomicLong received = new AtomicLong();
    private final AtomicLong failedDeliveries = new AtomicLong();
    private final AtomicLong outOfOrder = new AtomicLong();
    private volatile long lastDelivery;

    private long failMod;
    private int maxReconsume;
    private boolean orderly;

    private ConsumeCommand() {
    }

    static int run(String[] argv) throws Exception {
        return new ConsumeCommand().go(Args.parse(argv, 1, VALUED, BOOLS));
    }

    private int go(Args a) throws Exception {
        String namesrv = a.need("namesrv");
        String group = a.need("group");
        String topic = a.need("topic");
        String mode = a.need("mode");
        if (a.has("sub") && a.has("sql")) {
            throw new UsageException("give --sub or --sql, not both");
        }
        String sub = a.str("sub", "*");
        String sql = a.str("sql", null);
        long expect = a.num("expect", 0);
        long idleMs = a.num("idle-ms", 3000);
        long startMs = a.num("start-ms", 30000);
        failMod = a.num("fail-mod", 0);
        int threads = a.integer("threads", 0);
        int retryDelayLevel = a.integer("retry-delay-level", 0);
        boolean broadcast = a.has("broadcast");
        orderly = "orderly".equals(mode);
        // RocketMQ's defaults: 16 for concurrent consumers, unbounded for orderly ones
        maxReconsume = a.integer("max-reconsume", orderly ? Integer.MAX_VALUE : 16);

        String instance = "rmqstore-peer-" + ProcessHandle.current().pid();
        // topic routes are polled every 30 s by default; a retry topic made by the first
        // send-back would stay unseen that long (5.x fetches routes before its first heartbeat)
        int routePollMs = a.integer("route-poll-ms", 1000);
        long t0 = System.currentTimeMillis();
        Runnable shutdown;
        switch (mode) {
            case "push":
            case "orderly":
            case "pop": {
                DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
                c.setNamesrvAddr(namesrv);
                c.setInstanceName(instance);
                c.setPollNameServerInterval(routePollMs);
                c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                if (sql != null) {
                    c.subscribe(topic, MessageSelector.bySql(sql));
                } else {
                    c.subscribe(topic, sub);
                }
                if (threads > 0) {
                    c.setConsumeThreadMin(threads);
                    c.setConsumeThreadMax(threads);
                }
                if (a.has("max-reconsume")) {
                    c.setMaxReconsumeTimes(maxReconsume);
                }
                if (a.has("suspend-ms")) {
                    c.setSuspendCurrentQueueTimeMillis(a.num("suspend-ms", 1000));
                }
                // let running listeners finish before the offsets are persisted
                c.setAwaitTerminationMillisWhenShutdown(5000);
                if (broadcast) {
                    if ("pop".equals(mode)) {
                        throw new UsageException("--broadcast does not go with --mode pop");
                    }
                    Driver.COMPAT.broadcast(c);
                }
                if (orderly) {
                    c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                        boolean ok = true;
                        for (MessageExt m : msgs) {
                            ok &= deliver(m);
                        }
                        return ok ? ConsumeOrderlyStatus.SUCCESS : ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                    });
                } else {
                    c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                        boolean ok = true;
                        for (MessageExt m : msgs) {
                            ok &= deliver(m);
                        }
                        if (ok) {
                            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                        }
                        if (retryDelayLevel > 0) {
                            ctx.setDelayLevelWhenNextConsume(retryDelayLevel);
                        }
                        return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                    });
                }
                if ("pop".equals(mode)) {
                    Driver.COMPAT.preparePop(c, namesrv, topic, group, a.integer("pop-share-queues", 8));
                }
                c.start();
                waitDone(t0, expect, idleMs, startMs, null);
                shutdown = c::shutdown;
                break;
            }
            case "litepull": {
                if (failMod > 0) {
                    throw new UsageException("--fail-mod needs a push, orderly or pop consumer (lite pull has no retry)");
                }
                DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
                c.setNamesrvAddr(namesrv);
                c.setInstanceName(instance);
                c.setPollNameServerInterval(routePollMs);
                c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                c.setAutoCommit(true);
                if (threads > 0) {
                    c.setPullThreadNums(threads);
                }
                if (broadcast) {
                    Driver.COMPAT.broadcast(c);
                }
                if (sql != null) {
                    c.subscribe(topic, MessageSelector.bySql(sql));
                } else {
                    c.subscribe(topic, sub);
                }
                c.start();
                waitDone(t0, expect, idleMs, startMs, c);
                shutdown = () -> {
                    // auto commit only moves offsets on a later poll, and shutdown() persists
                    // what was committed: commit what was polled first
                    c.commitSync();
                    c.shutdown();
                };
                break;
            }
            default:
                throw new UsageException("--mode must be push, orderly, litepull or pop, not '" + mode + "'");
        }
        long millis = System.currentTimeMillis() - t0;
        try {
            shutdown.run();
        } catch (Throwable t) {
            Out.error("shutdown", t);
        }
        Json.Obj s = Json.obj("summary").put("received", received.get()).put("distinct", deliveries.size())
            .put("settled", settled.size()).put("failedDeliveries", failedDeliveries.get())
            .put("millis", millis).put("complete", expect <= 0 || settled.size() >= expect);
        if (orderly) {
            s.put("outOfOrder", outOfOrder.get());
        }
        Out.emit(s.put("errors", Out.errors()));
        return Out.errors() > 0 ? 1 : 0;
    }

    /** Polls (lite pull) or sleeps (push) until a stop condition holds. */
    private void waitDone(long t0, long expect, long idleMs, long startMs, DefaultLitePullConsumer pull) {
        while (true) {
            if (pull != null) {
                List<MessageExt> got = pull.poll(100);
                if (got != null) {
                    for (MessageExt m : got) {
                        deliver(m);
                    }
                }
            } else {
                Util.sleep(20);
            }
            long now = System.currentTimeMillis();
            if (expect > 0 && settled.size() >= expect) {
                return;
            }
            if (received.get() > 0 ? now - lastDelivery >= idleMs : now - t0 >= startMs) {
                return;
            }
        }
    }

    /** Prints one delivery; returns false when this delivery is to fail. */
    private boolean deliver(MessageExt m) {
        String id = m.getMsgId();
        int k = deliveries.merge(id, 1, Integer::sum);
        boolean fail = false;
        if (failMod > 0) {
            if (k == 1 && m.getQueueOffset() % failMod == 3 % failMod) {
                failing.add(id);
            }
            fail = failing.contains(id);
        }
        if (orderly && k == 1) {
            String q = Msgs.host(m.getStoreHost()) + "/" + m.getTopic() + "/" + m.getQueueId();
            Long prev = lastOffset.get(q);
            if (prev != null && m.getQueueOffset() < prev) {
                outOfOrder.incrementAndGet();
            }
            lastOffset.merge(q, m.getQueueOffset(), Math::max);
        }
        Json.Obj o = Json.obj("message");
        Msgs.delivered(o, m);
        o.put("delivery", k).put("thread", Thread.currentThread().getName()).put("outcome", fail ? "fail" : "ok");
        Out.emit(o);
        if (!fail || m.getReconsumeTimes() >= maxReconsume) {
            settled.add(id);
        }
        if (fail) {
            failedDeliveries.incrementAndGet();
        }
        received.incrementAndGet();
        lastDelivery = System.currentTimeMillis();
        return !fail;
    }
}
