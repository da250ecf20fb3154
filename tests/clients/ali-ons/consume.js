'use strict';
// Drains one topic with ali-ons' push consumer (through `rmqstore serve` or a live cluster) and
// prints every delivery as a JSON line: topic, queueId, queueOffset, commitLogOffset,
// reconsumeTimes, msgId (the offset id), tags, keys, properties (all of them, as a map), body
// (base64, decompressed as the client hands it over) and bodySha256, flag, sysFlag,
// bornTimestamp, storeTimestamp, bornHost, storeHost. Settings come from the environment:
//   NAMESRV      host:port of the name server (or of `rmqstore serve`)
//   GROUP        consumer group (clustering)
//   TOPIC        topic to subscribe to ('*')
//   FAIL_MOD     fail (throw) the first delivery of messages whose queueOffset % FAIL_MOD == 3,
//                and every redelivery; 0 fails nothing
//   MAX_RECONSUME  maxReconsumeTimes
//   IDLE_MS      stop after this long without a delivery (once one arrived)
//   START_MS     give up waiting for a first delivery after this long
//   MAX          stop once this many deliveries arrived (0: no limit)
// ACCESS_KEY / SECRET_KEY sign requests (plain ACL) when set; SERIALIZE_TYPE_FIELD writes the
// headers as rocketmq-rust's servers require them (header_field.js).

const crypto = require('crypto');
require('./header_field');
const httpclient = require('urllib');
const { Consumer } = require('ali-ons');

const env = process.env;
const failMod = Number(env.FAIL_MOD || 0);
const idleMs = Number(env.IDLE_MS || 3000);
const startMs = Number(env.START_MS || 30000);
const max = Number(env.MAX || 0);

const quiet = { info() {}, warn() {}, debug() {}, error(e) { process.stderr.write(`ali-ons: ${e && e.message || e}\n`); } };

async function main() {
  const options = {
    httpclient,
    nameSrv: env.NAMESRV,
    consumerGroup: env.GROUP,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    maxReconsumeTimes: Number(env.MAX_RECONSUME || 16),
    persistConsumerOffsetInterval: 500,
    rebalanceInterval: 1000,
    logger: quiet,
  };
  if (env.ACCESS_KEY) {
    options.accessKey = env.ACCESS_KEY;
    options.secretKey = env.SECRET_KEY;
  }
  const consumer = new Consumer(options);
  consumer.on('error', err => {
    // a new group has no stored offset yet; the consumer starts from the first one
    if (!/maybe this group consumer boot first/.test(err.message)) {
      process.stderr.write(`ali-ons error: ${err.message}\n`);
    }
  });
  let last = 0;
  let count = 0;
  consumer.subscribe(env.TOPIC, '*', async msg => {
    last = Date.now();
    count++;
    const line = {
      topic: msg.topic,
      queueId: msg.queueId,
      queueOffset: msg.queueOffset,
      commitLogOffset: Number(msg.commitLogOffset),
      reconsumeTimes: msg.reconsumeTimes,
      msgId: msg.msgId,
      tags: msg.tags || null,
      keys: msg.keys || null,
      properties: msg.properties,
      body: (msg.body || Buffer.alloc(0)).toString('base64'),
      bodySha256: crypto.createHash('sha256').update(msg.body || Buffer.alloc(0)).digest('hex'),
      flag: msg.flag,
      sysFlag: msg.sysFlag,
      bornTimestamp: msg.bornTimestamp,
      storeTimestamp: msg.storeTimestamp,
      bornHost: msg.bornHost,
      storeHost: msg.storeHost,
    };
    process.stdout.write(JSON.stringify(line) + '\n');
    const fail = failMod > 0 && (msg.reconsumeTimes > 0 || msg.queueOffset % failMod === 3);
    if (fail) throw new Error('failed on purpose');
  });
  await consumer.ready();
  const began = Date.now();
  for (;;) {
    await new Promise(r => setTimeout(r, 100));
    if (max > 0 && count >= max) break;
    if (count === 0 && Date.now() - began > startMs) break;
    if (count > 0 && Date.now() - last > idleMs) break;
  }
  await consumer.close();
  process.stderr.write(`ali-ons: ${count} deliveries\n`);
}

main().then(() => process.exit(0), err => {
  process.stderr.write(`ali-ons failed: ${err.stack || err}\n`);
  process.exit(1);
});
