//! Sending messages as the 4.9 `DefaultMQProducer` does: single messages with
//! `SEND_MESSAGE_V2`, batches with `SEND_BATCH_MESSAGE`, retried on another broker by the
//! producer's rules, backed off on `SYSTEM_BUSY`.
