package rmqstore.peer;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/** Turns messages into JSON fields named as in the project's oracle files. */
final class Msgs {
    private Msgs() {
    }

    static String host(SocketAddress a) {
        if (a == null) {
            return null;
        }
        if (a instanceof InetSocketAddress) {
            InetSocketAddress i = (InetSocketAddress) a;
            String h = i.getAddress() != null ? i.getAddress().getHostAddress() : i.getHostString();
            return h + ":" + i.getPort();
        }
        return a.toString();
    }

    /**
     * The fields of a message as the store holds it (store command). The body is the stored
     * one: the driver decodes without decompressing.
     */
    static Json.Obj stored(Json.Obj o, MessageExt m) {
        byte[] body = m.getBody();
        return o.put("physicalOffset", m.getCommitLogOffset())
            .put("size", m.getStoreSize())
            .put("topic", m.getTopic())
            .put("queueId", m.getQueueId())
            .put("queueOffset", m.getQueueOffset())
            .put("sysFlag", m.getSysFlag())
            .put("storeTimestamp", m.getStoreTimestamp())
            .put("bornTimestamp", m.getBornTimestamp())
            .put("bornHost", host(m.getBornHost()))
            .put("storeHost", host(m.getStoreHost()))
            .put("preparedTransactionOffset", m.getPreparedTransactionOffset())
            .put("keys", m.getKeys())
            .put("uniqKey", m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
            .put("msgId", m.getMsgId())
            .put("offsetMsgId", offsetMsgId(m))
            .put("bodyCRC", m.getBodyCRC())
            .put("reconsumeTimes", m.getReconsumeTimes())
            .put("flag", m.getFlag())
            .put("properties", Util.sorted(m.getProperties()))
            .put("bodyLen", body == null ? 0 : body.length)
            .put("bodySha256", Util.sha256(body))
            .put("body", Util.base64(body));
    }

    /** The fields of a message as a consumer receives it (body already decompressed). */
    static Json.Obj delivered(Json.Obj o, MessageExt m) {
        byte[] body = m.getBody();
        return o.put("topic", m.getTopic())
            .put("queueId", m.getQueueId())
            .put("queueOffset", m.getQueueOffset())
            .put("physicalOffset", m.getCommitLogOffset())
            .put("size", m.getStoreSize())
            .put("msgId", m.getMsgId())
            .put("offsetMsgId", offsetMsgId(m))
            .put("uniqKey", m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
            .put("keys", m.getKeys())
            .put("tags", m.getTags())
            .put("properties", Util.sorted(m.getProperties()))
            .put("bodyCRC", m.getBodyCRC())
            .put("bodyLen", body == null ? 0 : body.length)
            .put("bodySha256", Util.sha256(body))
            .put("body", Util.base64(body))
            .put("bornTimestamp", m.getBornTimestamp())
            .put("storeTimestamp", m.getStoreTimestamp())
            .put("bornHost", host(m.getBornHost()))
            .put("storeHost", host(m.getStoreHost()))
            .put("reconsumeTimes", m.getReconsumeTimes())
            .put("sysFlag", m.getSysFlag())
            .put("flag", m.getFlag())
            .put("preparedTransactionOffset", m.getPreparedTransactionOffset());
    }

    /** The offset message id; MessageClientExt carries it separately from the unique id. */
    static String offsetMsgId(MessageExt m) {
        if (m instanceof org.apache.rocketmq.common.message.MessageClientExt) {
            return ((org.apache.rocketmq.common.message.MessageClientExt) m).getOffsetMsgId();
        }
        return m.getMsgId();
    }
}
