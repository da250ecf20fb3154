package rmqstore.peer;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.java.exception.BadRequestException;
import org.apache.rocketmq.client.java.exception.ForbiddenException;
import org.apache.rocketmq.client.java.exception.NotFoundException;
import org.apache.rocketmq.client.java.exception.UnauthorizedException;
import org.apache.rocketmq.client.java.exception.UnsupportedException;

/**
 * grpc-produce / grpc-consume: the 5.x gRPC client (rocketmq-client-java) against a proxy.
 *
 * Runs in a class loader of its own holding only the driver classes and the client jar
 * (lib/grpc), see CompatImpl: the client bundles its own apache.rocketmq.v2 classes, which
 * clash with the proxy's rocketmq-proto jar in lib. So nothing here may touch RocketMQ's
 * remoting jars.
 */
public final class Grpc {
    private Grpc() {
    }

    /** Entry point inside the isolated class loader; returns the exit code. */
    public static int main0(String[] argv) {
        Out.init();
        try {
            return "grpc-produce".equals(argv[0]) ? produce(argv) : consume(argv);
        } catch (UsageException e) {
            Out.error("usage", e.getMessage(), null);
            return 2;
        } catch (Throwable t) {
            Out.error("run", t);
            return 1;
        } finally {
            Out.flush();
        }
    }

    private static ClientConfiguration config(String endpoint, long timeoutMs) {
        return ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .enableSsl(false)
            .setRequestTimeout(Duration.ofMillis(timeoutMs))
            .build();
    }

    static int produce(String[] argv) throws Exception {
        Args a = Args.parse(argv, 1, new String[] {
            "endpoint", "topic", "count", "tag", "keys-prefix", "start", "size", "prop", "timeout-ms",
        }, new String[] {"keep-going"});
        String endpoint = a.need("endpoint");
        String topic = a.need("topic");
        long count = a.num("count", -1);
        if (count < 0) {
            throw new UsageException("--count is required");
        }
        String tag = a.str("tag", null);
        String keysPrefix = a.str("keys-prefix", "k-");
        long start = a.num("start", 0);
        int size = a.integer("size", 128);
        List<String[]> props = a.pairs("prop");
        boolean keepGoing = a.has("keep-going");

        ClientServiceProvider provider = ClientServiceProvider.loadService();
        long t0 = System.currentTimeMillis();
        long sent = 0;
        long failed = 0;
        try (Producer producer = provider.newProducerBuilder()
            .setClientConfiguration(config(endpoint, a.num("timeout-ms", 10000)))
            .setTopics(topic)
            .build()) {
            for (long i = start; i < start + count; i++) {
                MessageBuilder b = provider.newMessageBuilder()
                    .setTopic(topic)
                    .setKeys(keysPrefix + i)
                    .setBody(Util.body(i, size))
                    .addProperty("seq", Long.toString(i));
                if (tag != null) {
                    b.setTag(tag);
                }
                for (String[] p : props) {
                    b.addProperty(p[0], p[1]);
                }
                Message m = b.build();
                try {
                    SendReceipt r = producer.send(m);
                    Out.emit(Json.obj("sent").put("i", i).put("messageId", r.getMessageId().toString()));
                    sent++;
                } catch (Throwable e) {
                    Out.emit(Json.obj("failed").put("i", i).put("error", Out.describe(e)));
                    failed++;
                    if (!keepGoing) {
                        Out.error("send", "stopped at the first failed send (" + sent + " sent)", null);
                        return 1;
                    }
                }
            }
        }
        Out.emit(Json.obj("summary").put("sent", sent).put("failed", failed)
            .put("millis", System.currentTimeMillis() - t0).put("errors", Out.errors()));
        return Out.errors() > 0 ? 1 : 0;
    }

    static int consume(String[] argv) throws Exception {
        Args a = Args.parse(argv, 1, new String[] {
            "endpoint", "group", "topic", "tag", "sql", "expect", "idle-ms", "start-ms", "invisible-ms",
            "ack-mod", "batch", "await-ms", "timeout-ms",
        }, new String[0]);
        String endpoint = a.need("endpoint");
        String group = a.need("group");
        String topic = a.need("topic");
        FilterExpression filter = a.has("sql")
            ? new FilterExpression(a.need("sql"), FilterExpressionType.SQL92)
            : new FilterExpression(a.str("tag", "*"), FilterExpressionType.TAG);
        long expect = a.num("expect", 0);
        long idleMs = a.num("idle-ms", 3000);
        long startMs = a.num("start-ms", 30000);
        // the proxy's minimum (proxy config minInvisibleTimeMillsForRecv) is 10 s
        long invisibleMs = a.num("invisible-ms", 10000);
        long ackMod = a.num("ack-mod", 0);
        int batch = a.integer("batch", 16);
        // long polling wait of one receive call: short, so that --idle-ms is honoured
        long awaitMs = a.num("await-ms", Math.max(100, Math.min(2000, idleMs / 2)));

        ClientServiceProvider provider = ClientServiceProvider.loadService();
        Map<String, Integer> deliveries = new java.util.HashMap<>();
        Set<String> acked = new HashSet<>();
        long received = 0;
        long unacked = 0;
        long t0 = System.currentTimeMillis();
        long last = 0;
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder()
            .setClientConfiguration(config(endpoint, a.num("timeout-ms", 10000)))
            .setConsumerGroup(group)
            .setAwaitDuration(Duration.ofMillis(awaitMs))
            .setSubscriptionExpressions(Collections.singletonMap(topic, filter))
            .build()) {
            while (true) {
                long now = System.currentTimeMillis();
                if (expect > 0 && acked.size() >= expect) {
                    break;
                }
                if (received > 0 ? now - last >= idleMs : now - t0 >= startMs) {
                    break;
                }
                List<MessageView> got;
                try {
                    got = consumer.receive(batch, Duration.ofMillis(invisibleMs));
                } catch (BadRequestException | ForbiddenException | UnauthorizedException
                    | NotFoundException | UnsupportedException e) {
                    // the proxy refuses the request itself (e.g. invisible time below its minimum)
                    Out.error("receive", e);
                    break;
                } catch (Throwable e) {
                    // timeouts, throttling, a route not ready yet: go on until a limit hits
                    Out.emit(Json.obj("warn").put("step", "receive").put("exception", Out.describe(e)));
                    Util.sleep(200);
                    continue;
                }
                for (MessageView v : got) {
                    String id = v.getMessageId().toString();
                    int k = deliveries.merge(id, 1, Integer::sum);
                    long seq = seqOf(v, received);
                    boolean skipAck = ackMod > 0 && seq % ackMod == 1 % ackMod && v.getDeliveryAttempt() <= 1;
                    Json.Obj o = Json.obj("message")
                        .put("messageId", id)
                        .put("topic", v.getTopic())
                        .put("tag", v.getTag().orElse(null))
                        .put("keys", new ArrayList<>(v.getKeys()))
                        .put("properties", Util.sorted(v.getProperties()))
                        .put("bodyLen", v.getBody().remaining())
                        .put("bodySha256", Util.sha256(bytes(v.getBody())))
                        .put("body", Util.base64(bytes(v.getBody())))
                        .put("bornTimestamp", v.getBornTimestamp())
                        .put("bornHost", v.getBornHost())
                        .put("deliveryAttempt", v.getDeliveryAttempt())
                        .opt("messageGroup", v.getMessageGroup().orElse(null))
                        .opt("deliveryTimestamp", v.getDeliveryTimestamp().orElse(null))
                        .put("delivery", k)
                        .put("acked", !skipAck);
                    Out.emit(o);
                    received++;
                    last = System.currentTimeMillis();
                    if (skipAck) {
                        unacked++;
                        continue;
                    }
                    try {
                        consumer.ack(v);
                        acked.add(id);
                    } catch (Throwable e) {
                        Out.error("ack", Out.describe(e), Json.obj().put("messageId", id));
                    }
                }
            }
        }
        Out.emit(Json.obj("summary").put("received", received).put("distinct", deliveries.size())
            .put("acked", acked.size()).put("notAcked", unacked)
            .put("millis", System.currentTimeMillis() - t0)
            .put("complete", expect <= 0 || acked.size() >= expect).put("errors", Out.errors()));
        return Out.errors() > 0 ? 1 : 0;
    }

    /** The sequence number of our producers (property seq), else the arrival index. */
    private static long seqOf(MessageView v, long arrival) {
        String s = v.getProperties().get("seq");
        if (s != null) {
            try {
                return Long.parseLong(s);
            } catch (NumberFormatException ignored) {
                // not ours: fall back
            }
        }
        return arrival;
    }

    private static byte[] bytes(ByteBuffer b) {
        ByteBuffer d = b.duplicate();
        byte[] out = new byte[d.remaining()];
        d.get(out);
        return out;
    }
}
