'use strict';
// Sends messages with ali-ons' producer and prints what the broker answered, one JSON line per
// message. Messages come on stdin, one JSON object a line:
//   { "topic": "T", "body": "<base64>", "tags": "A", "keys": ["k1", "k2"],
//     "properties": { "name": "value" }, "delayLevel": 3, "shardingKey": "s" }
// (all but topic and body optional; properties may include UNIQ_KEY, which ali-ons does not set
// itself). Each answer: { "sendStatus", "msgId", "queueId", "queueOffset" } or { "error" }; a
// refused message does not stop the others. Settings come from the environment:
//   NAMESRV      host:port of the name server
//   GROUP        producer group
// ACCESS_KEY / SECRET_KEY sign requests (plain ACL) when set; SERIALIZE_TYPE_FIELD writes the
// headers as rocketmq-rust's servers require them (header_field.js).

const readline = require('readline');
require('./header_field');
const httpclient = require('urllib');
const { Producer, Message } = require('ali-ons');

const env = process.env;

const quiet = { info() {}, warn() {}, debug() {}, error() {} };

async function main() {
  const options = {
    httpclient,
    nameSrv: env.NAMESRV,
    producerGroup: env.GROUP || 'rmqstore-test-producer',
    logger: quiet,
  };
  if (env.ACCESS_KEY) {
    options.accessKey = env.ACCESS_KEY;
    options.secretKey = env.SECRET_KEY;
  }
  const producer = new Producer(options);
  producer.on('error', err => process.stderr.write(`ali-ons error: ${err.message}\n`));
  await producer.ready();
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const m = JSON.parse(line);
    const msg = new Message(m.topic, m.tags || null, Buffer.from(m.body || '', 'base64'));
    if (!m.tags) delete msg.properties.TAGS;
    if (m.keys) msg.keys = Array.isArray(m.keys) ? m.keys : [m.keys];
    Object.assign(msg.properties, m.properties || {});
    if (m.delayLevel) msg.delayTimeLevel = m.delayLevel;
    if (m.shardingKey) msg.shardingKey = m.shardingKey;
    let out;
    try {
      const r = await producer.send(msg);
      out = {
        sendStatus: r.sendStatus,
        msgId: r.msgId,
        queueId: Number(r.messageQueue.queueId),
        queueOffset: r.queueOffset,
      };
    } catch (err) {
      out = { error: err.message };
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  }
  // closing unregisters the client, which a broker with ACL refuses to an unsigned one
  await producer.close().catch(err => process.stderr.write(`ali-ons close: ${err.message}\n`));
}

main().then(() => process.exit(0), err => {
  process.stderr.write(`ali-ons failed: ${err.stack || err}\n`);
  process.exit(1);
});
