//! Arbitrary bytes as a remoting receive buffer: frames one after another with a small and the
//! default size limit, each header in its own form, plus the bytes as a bare header of either
//! form and as the JSON bodies clients send.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmqstore::remoting::body::{
    ClusterInfo, ConsumerListByGroup, HeartbeatData, LockBatchRequestBody, TopicList,
    TopicRouteData,
};
use rmqstore::remoting::command::{binary, json, MAX_EXT_FIELDS};
use rmqstore::remoting::frame::MAX_HEADER_LEN;
use rmqstore::remoting::header::{CustomHeader, PullMessageRequestHeader};
use rmqstore::remoting::{self, acl, FrameCodec, RemotingCommand};

/// A command that decoded writes a frame that decodes to the same command and body.
fn round_trip(cmd: &RemotingCommand, body: &[u8]) {
    let mut out = Vec::new();
    match cmd.encode(body, &mut out) {
        Ok(()) => {
            // a JSON header may grow when rewritten: read it back without the header limit
            let wide = FrameCodec::default().with_max_header(MAX_HEADER_LEN);
            let (again, used) = remoting::decode(&wide, &out)
                .expect("own frame decodes")
                .expect("own frame is complete");
            assert_eq!(used, out.len());
            assert_eq!(&again.command, cmd);
            assert_eq!(again.body, body);
            let split = cmd.encode_split(body).expect("split encoding agrees");
            assert_eq!(split.to_vec(), out);
        }
        // Only the 16 MiB limit can refuse what was read (a JSON header may grow when rewritten).
        Err(e) => assert!(matches!(e, remoting::Error::Frame(_)), "{e}"),
    }
    let _ = PullMessageRequestHeader::from_ext(&cmd.ext_fields);
    let _ = acl::verify(&cmd.ext_fields, body, "secret");
}

fuzz_target!(|data: &[u8]| {
    for codec in [
        FrameCodec::new(256),
        FrameCodec::default(),
        FrameCodec::default().with_max_header(64),
    ] {
        let mut rest = data;
        loop {
            match remoting::decode(&codec, rest) {
                Ok(Some((packet, used))) => {
                    assert!(used >= 8 && used <= rest.len() && used <= codec.max_frame());
                    assert!(packet.command.ext_fields.len() <= MAX_EXT_FIELDS);
                    round_trip(&packet.command, packet.body);
                    rest = &rest[used..];
                }
                Ok(None) => {
                    if let Ok(Some(n)) = codec.frame_len(rest) {
                        assert!(n <= codec.max_frame());
                    }
                    break;
                }
                // A bad header spoils one frame; skip it by its known length, as a server may.
                Err(remoting::Error::Header(e)) => {
                    let _ = e.to_string();
                    match codec.frame_len(rest) {
                        Ok(Some(n)) if n <= rest.len() => rest = &rest[n..],
                        other => panic!("header error without a whole frame: {other:?}"),
                    }
                }
                Err(remoting::Error::Frame(e)) => {
                    let _ = e.to_string();
                    break;
                }
            }
        }
    }
    if let Ok(cmd) = binary::decode(data) {
        let bytes = binary::encode(&cmd).expect("what was read fits");
        assert_eq!(binary::decode(&bytes), Ok(cmd));
    }
    if let Ok(cmd) = json::decode(data) {
        assert_eq!(json::decode(json::encode(&cmd).as_bytes()), Ok(cmd));
    }
    let _ = HeartbeatData::from_json(data);
    let _ = TopicRouteData::from_json(data);
    let _ = ClusterInfo::from_json(data);
    let _ = ConsumerListByGroup::from_json(data);
    let _ = LockBatchRequestBody::from_json(data);
    let _ = TopicList::from_json(data);
});
