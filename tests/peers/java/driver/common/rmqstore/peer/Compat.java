package rmqstore.peer;

import java.io.File;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * What differs between RocketMQ 4.9 and 5.x. Each kit compiles the common sources with
 * one implementation, CompatImpl, from driver/v4 or driver/v5.
 */
interface Compat {
    /** "4.9" or "5.x". */
    String line();

    /** The RocketMQ version of the jars on the class path. */
    String rocketmqVersion();

    /** Constructs the store the way the broker does (constructor differs). */
    DefaultMessageStore newStore(MessageStoreConfig msc, BrokerStatsManager stats, BrokerConfig bc,
        File storeRoot) throws Exception;

    /** The tags code of one consume queue unit, or null when it cannot be read. */
    Long tagsCode(DefaultMessageStore store, String topic, int queueId, long offset);

    /** MessageModel moved packages between 4.9 and 5.x. */
    void broadcast(DefaultMQPushConsumer consumer);

    void broadcast(DefaultLitePullConsumer consumer);

    /**
     * Prepares a push consumer for POP consumption (5.x only): switches the group's request
     * mode on every broker of the topic and turns client rebalance off.
     */
    void preparePop(DefaultMQPushConsumer consumer, String namesrv, String topic, String group,
        int popShareQueueNum) throws Exception;

    /** Commands only this kit has (the gRPC client on 5.x). */
    List<String> extraCommands();

    /** Runs one of extraCommands(); returns the exit code. */
    int runExtra(String command, String[] argv) throws Exception;
}
