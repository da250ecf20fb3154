package rmqstore.peer;

import java.io.File;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.MessageRequestMode;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;
import org.apache.rocketmq.remoting.protocol.body.TopicConfigSerializeWrapper;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.queue.ConsumeQueueInterface;
import org.apache.rocketmq.store.queue.CqUnit;
import org.apache.rocketmq.store.stats.BrokerStatsManager;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/** RocketMQ 5.x side of Compat. */
final class CompatImpl implements Compat {
    @Override
    public String line() {
        return "5.x";
    }

    @Override
    public String rocketmqVersion() {
        return MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION);
    }

    @Override
    public DefaultMessageStore newStore(MessageStoreConfig msc, BrokerStatsManager stats, BrokerConfig bc,
        File storeRoot) throws Exception {
        // 5.x passes the broker's topic table to the store (queue type, cleanup policy):
        // read it from config/topics.json as TopicConfigManager does
        ConcurrentMap<String, TopicConfig> topics = new ConcurrentHashMap<>();
        File f = new File(new File(storeRoot, "config"), "topics.json");
        if (f.isFile() && f.length() > 0) {
            String json = new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8);
            TopicConfigSerializeWrapper w = RemotingSerializable.fromJson(json, TopicConfigSerializeWrapper.class);
            if (w != null && w.getTopicConfigTable() != null) {
                topics.putAll(w.getTopicConfigTable());
            }
        }
        return new DefaultMessageStore(msc, stats, null, bc, topics);
    }

    @Override
    public Long tagsCode(DefaultMessageStore store, String topic, int queueId, long offset) {
        ConsumeQueueInterface cq = store.getConsumeQueueTable().containsKey(topic)
            ? store.getConsumeQueueTable().get(topic).get(queueId) : null;
        if (cq == null) {
            return null;
        }
        CqUnit u = cq.get(offset);
        return u == null ? null : u.getTagsCode();
    }

    @Override
    public void broadcast(DefaultMQPushConsumer consumer) {
        consumer.setMessageModel(MessageModel.BROADCASTING);
    }

    @Override
    public void broadcast(DefaultLitePullConsumer consumer) {
        consumer.setMessageModel(MessageModel.BROADCASTING);
    }

    /**
     * POP for the remoting push consumer, as RocketMQ 5.5.0's own PopConsumer example does it:
     * the broker keeps a request mode per (topic, group), set with the admin request
     * SET_MESSAGE_REQUEST_MODE on every broker of the topic; the client asks the broker for its
     * assignment (QUERY_ASSIGNMENT) instead of rebalancing itself only when clientRebalance is
     * false, the listener is concurrent and the model is clustering, and then pops.
     */
    @Override
    public void preparePop(DefaultMQPushConsumer consumer, String namesrv, String topic, String group,
        int popShareQueueNum) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("rmqstore-peer-admin-" + ProcessHandle.current().pid());
        admin.start();
        try {
            TopicRouteData route = admin.examineTopicRouteInfo(topic);
            Set<String> addrs = new HashSet<>();
            for (BrokerData bd : route.getBrokerDatas()) {
                addrs.addAll(bd.getBrokerAddrs().values());
            }
            for (String addr : addrs) {
                admin.setMessageRequestMode(addr, topic, group, MessageRequestMode.POP, popShareQueueNum, 5000);
            }
        } finally {
            admin.shutdown();
        }
        consumer.setClientRebalance(false);
    }

    @Override
    public List<String> extraCommands() {
        return Arrays.asList("grpc-produce", "grpc-consume");
    }

    @Override
    public int runExtra(String command, String[] argv) throws Exception {
        // a loader of its own: the driver classes and lib/grpc (the shaded gRPC client),
        // nothing of lib; the JDK comes from the platform loader
        // the driver runs from KIT/driver or from KIT/driver/rmqstore-peer.jar
        File driverDir = new File(Driver.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        File kitDir = driverDir.isFile() ? driverDir.getParentFile().getParentFile() : driverDir.getParentFile();
        String override = System.getProperty("rmqstore.peer.grpcLib");
        File grpcDir = override != null ? new File(override) : new File(new File(kitDir, "lib"), "grpc");
        File[] jars = grpcDir.listFiles((d, n) -> n.endsWith(".jar"));
        if (jars == null || jars.length == 0) {
            throw new IllegalStateException("no gRPC client jar in " + grpcDir + " (run the install script)");
        }
        List<URL> urls = new ArrayList<>();
        urls.add(driverDir.toURI().toURL());
        for (File j : jars) {
            urls.add(j.toURI().toURL());
        }
        Out.flush();
        ClassLoader old = Thread.currentThread().getContextClassLoader();
        try (URLClassLoader cl = new URLClassLoader("rmqstore-grpc", urls.toArray(new URL[0]),
            ClassLoader.getPlatformClassLoader())) {
            Thread.currentThread().setContextClassLoader(cl);
            Method m = Class.forName("rmqstore.peer.Grpc", true, cl).getMethod("main0", String[].class);
            return (Integer) m.invoke(null, (Object) argv);
        } finally {
            Thread.currentThread().setContextClassLoader(old);
        }
    }
}
