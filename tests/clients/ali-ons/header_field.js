'use strict';
// ali-ons writes its requests in ways Java peers accept but rocketmq-rust's name server and
// broker do not: JSON command headers without `serializeTypeCurrentRPC` and with numbers and
// booleans among the `extFields` values (the connection is closed without an answer), and
// heartbeats whose subscriptions lack `expressionType` (refused, "Serialization failed"). With
// SERIALIZE_TYPE_FIELD set, this writes them as the Java client does: the field ("JSON") added,
// every extFields value a string (as JS prints it, which is also what ali-ons signs), and
// `expressionType: "TAG"` in each subscription, before the request is signed. The scripts load
// it before they connect.

if (process.env.SERIALIZE_TYPE_FIELD) {
  const RemotingCommand = require('ali-ons/lib/protocol/command/remoting_command');
  const buildHeader = RemotingCommand.prototype.buildHeader;
  RemotingCommand.prototype.buildHeader = function() {
    const header = JSON.parse(buildHeader.call(this).toString('utf8'));
    header.serializeTypeCurrentRPC = 'JSON';
    for (const key of Object.keys(header.extFields || {})) {
      header.extFields[key] = String(header.extFields[key]);
    }
    return Buffer.from(JSON.stringify(header), 'utf8');
  };

  const MQClientAPI = require('ali-ons/lib/mq_client_api');
  const sendHeartbeat = MQClientAPI.prototype.sendHearbeat;
  MQClientAPI.prototype.sendHearbeat = function(addr, heartbeatData, timeout) {
    for (const consumer of heartbeatData.consumerDataSet || []) {
      for (const sub of consumer.subscriptionDataSet || []) {
        sub.expressionType = sub.expressionType || 'TAG';
      }
    }
    return sendHeartbeat.call(this, addr, heartbeatData, timeout);
  };
}
