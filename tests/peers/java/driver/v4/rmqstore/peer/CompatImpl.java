package rmqstore.peer;

import java.io.File;
import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.store.ConsumeQueue;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/** RocketMQ 4.9 side of Compat. */
final class CompatImpl implements Compat {
    @Override
    public String line() {
        return "4.9";
    }

    @Override
    public String rocketmqVersion() {
        return MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION);
    }

    @Override
    public DefaultMessageStore newStore(MessageStoreConfig msc, BrokerStatsManager stats, BrokerConfig bc,
        File storeRoot) throws Exception {
        // as BrokerController.initialize() in 4.9: no message arriving listener is needed on a slave
        return new DefaultMessageStore(msc, stats, null, bc);
    }

    @Override
    public Long tagsCode(DefaultMessageStore store, String topic, int queueId, long offset) {
        ConsumeQueue cq = store.getConsumeQueueTable().containsKey(topic)
            ? store.getConsumeQueueTable().get(topic).get(queueId) : null;
        if (cq == null) {
            return null;
        }
        SelectMappedBufferResult r = cq.getIndexBuffer(offset);
        if (r == null) {
            return null;
        }
        try {
            ByteBuffer b = r.getByteBuffer();
            if (b.remaining() < 20) {
                return null;
            }
            // unit: commitlog offset (8), size (4), tags code (8)
            return b.getLong(b.position() + 12);
        } finally {
            r.release();
        }
    }

    @Override
    public void broadcast(DefaultMQPushConsumer consumer) {
        consumer.setMessageModel(MessageModel.BROADCASTING);
    }

    @Override
    public void broadcast(DefaultLitePullConsumer consumer) {
        consumer.setMessageModel(MessageModel.BROADCASTING);
    }

    @Override
    public void preparePop(DefaultMQPushConsumer consumer, String namesrv, String topic, String group,
        int popShareQueueNum) throws Exception {
        throw new UsageException("--mode pop needs the 5.x kit (RocketMQ 4.9 has no POP consumption)");
    }

    @Override
    public List<String> extraCommands() {
        return Collections.emptyList();
    }

    @Override
    public int runExtra(String command, String[] argv) throws Exception {
        throw new UsageException("'" + command + "' is not available in the 4.9 kit");
    }
}
