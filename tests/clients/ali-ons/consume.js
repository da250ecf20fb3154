'use strict';
// Drains one topic through `rmqstore serve` with ali-ons' push consumer and prints every
// delivery as a JSON line. Settings come from the environment:
//   NAMESRV      host:port printed by `rmqstore serve`
//   GROUP        consumer group (clustering)
//   TOPIC        topic to subscribe to ('*')
//   FAIL_MOD     fail (throw) the first delivery of messages whose queueOffset % FAIL_MOD == 3,
//                and every redelivery; 0 fails nothing
//   MAX_RECONSUME  maxReconsumeTimes
//   IDLE_MS      stop after this long without a delivery (once one arrived)
//   START_MS     give up waiting for a first delivery after this long
// ACCESS_KEY / SECRET_KEY sign requests (plain ACL) when set.

const crypto = require('crypto');
const httpclient = require('urllib');
const { Consumer } = require('ali-ons');

const env = process.env;
const failMod = Number(env.FAIL_MOD || 0);
const idleMs = Number(env.IDLE_MS || 3000);
const startMs = Number(env.START_MS || 30000);

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
  consumer.on('error', err => process.stderr.write(`ali-ons error: ${err.message}\n`));
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
      bodySha256: crypto.createHash('sha256').update(msg.body).digest('hex'),
    };
    process.stdout.write(JSON.stringify(line) + '\n');
    const fail = failMod > 0 && (msg.reconsumeTimes > 0 || msg.queueOffset % failMod === 3);
    if (fail) throw new Error('failed on purpose');
  });
  await consumer.ready();
  const began = Date.now();
  for (;;) {
    await new Promise(r => setTimeout(r, 100));
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
