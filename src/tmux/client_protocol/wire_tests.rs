#![allow(clippy::unwrap_used)]

use super::*;

/// A header as `imsg_create` lays it out (x86-64 and aarch64 are both
/// little-endian; the layout is native order).
fn header(kind: u32, len: u16, fd: bool) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&kind.to_le_bytes());
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(&u16::from(fd).to_le_bytes());
    h.extend_from_slice(&8u32.to_le_bytes());
    h.extend_from_slice(&[0xff; 4]);
    h
}

#[test]
#[cfg(target_endian = "little")]
fn the_header_is_imsg_hdr() {
    let m = encode(msg::IDENTIFY_DONE, &[], false).unwrap();
    assert_eq!(m.bytes, header(106, 16, false));
    let m = encode(msg::IDENTIFY_STDIN, &[], true).unwrap();
    assert_eq!(m.bytes, header(104, 16, true));
    assert!(m.with_fd);
    let m = encode(msg::IDENTIFY_TERM, b"xterm\0", false).unwrap();
    let mut want = header(101, 22, false);
    want.extend_from_slice(b"xterm\0");
    assert_eq!(m.bytes, want);
}

#[test]
fn message_numbers_are_tmux_protocol_h() {
    // enum msgtype: MSG_IDENTIFY_FLAGS = 100 counts up through
    // MSG_IDENTIFY_TERMINFO (112); MSG_COMMAND = 200 up through MSG_FLAGS;
    // MSG_READ_OPEN = 300.
    assert_eq!(msg::IDENTIFY_LONGFLAGS, 100 + 11);
    assert_eq!(msg::EXITING, 200 + 5);
    assert_eq!(msg::SHUTDOWN, 200 + 10);
    assert_eq!(msg::FLAGS, 200 + 18);
    assert_eq!(msg::WRITE_READY, 300 + 5);
    assert_eq!(CONTROL_FLAGS, 0x1001_3000);
}

#[test]
fn the_limit_is_max_imsgsize() {
    assert!(encode(msg::COMMAND, &[0; MAX_MESSAGE - HEADER_LEN], false).is_some());
    assert!(encode(msg::COMMAND, &[0; MAX_MESSAGE - HEADER_LEN + 1], false).is_none());
    assert!(command(&["x".repeat(MAX_MESSAGE)]).is_none());
}

#[test]
#[cfg(target_endian = "little")]
fn the_command_is_argc_then_packed_argv() {
    let m = command(&["attach-session", "-t", "=s"]).unwrap();
    let mut want = header(200, 16 + 4 + 15 + 3 + 3, false);
    want.extend_from_slice(&3i32.to_le_bytes());
    want.extend_from_slice(b"attach-session\0-t\0=s\0");
    assert_eq!(m.bytes, want);
    assert!(!m.with_fd);
}

#[test]
#[cfg(target_endian = "little")]
fn identify_is_client_send_identify_with_the_flags_last() {
    let who = Identity {
        term: b"",
        cwd: b"/tmp",
        pid: 4242,
        environ: vec![b"A=1", b"B=x\0cut"],
    };
    let got = identify(&who);
    let kinds: Vec<u32> = got
        .iter()
        .map(|m| u32::from_le_bytes(m.bytes[..4].try_into().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [101, 109, 102, 108, 107, 105, 105, 104, 110, 100, 111, 106]
    );
    let fds: Vec<bool> = got.iter().map(|m| m.with_fd).collect();
    assert_eq!(fds.iter().filter(|&&f| f).count(), 2);
    // The flags after the last descriptor, with `MSG_IDENTIFY_DONE`: the
    // server reads them in one read (see `identify`).
    assert!(fds[7] && fds[8]);
    assert_eq!(&got[0].bytes[16..], b"\0", "no TERM is an empty string");
    assert_eq!(&got[1].bytes[16..], &0i32.to_le_bytes());
    assert_eq!(&got[2].bytes[16..], b"\0", "a pipe has no ttyname");
    assert_eq!(&got[3].bytes[16..], b"/tmp\0");
    assert_eq!(&got[4].bytes[16..], &4242i32.to_le_bytes());
    assert_eq!(&got[5].bytes[16..], b"A=1\0");
    assert_eq!(&got[6].bytes[16..], b"B=x\0", "C reads up to the NUL");
    assert_eq!(got[7].bytes.len(), 16);
    assert_eq!(&got[9].bytes[16..], &0x1001_3000i32.to_le_bytes());
    assert_eq!(&got[10].bytes[16..], &0x1001_3000u64.to_le_bytes());
    // Each length field is the whole message.
    for m in &got {
        assert_eq!(
            usize::from(u16::from_le_bytes([m.bytes[4], m.bytes[5]])),
            m.bytes.len()
        );
    }
}

#[test]
fn an_environment_string_past_the_limit_is_skipped() {
    let long = format!("L={}", "y".repeat(MAX_MESSAGE));
    let who = Identity {
        term: b"xterm",
        cwd: b"/",
        pid: 1,
        environ: vec![long.as_bytes(), b"S=1"],
    };
    let got = identify(&who);
    let environ: Vec<&[u8]> = got
        .iter()
        .filter(|m| m.bytes[..4] == msg::IDENTIFY_ENVIRON.to_ne_bytes())
        .map(|m| &m.bytes[16..])
        .collect();
    assert_eq!(environ, [b"S=1\0".as_slice()]);
}

#[test]
fn decode_takes_whole_messages_and_keeps_the_rest() {
    let exit = encode(msg::EXIT, b"\0\0\0\0too far behind\0", false).unwrap();
    let exited = encode(msg::EXITED, &[], false).unwrap();
    let mut buf = exit.bytes.clone();
    buf.extend_from_slice(&exited.bytes[..10]);
    let got = decode(&mut buf).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].kind, msg::EXIT);
    assert_eq!(got[0].version, 8);
    assert_eq!(
        exit_message(&got[0].payload).as_deref(),
        Some("too far behind")
    );
    assert_eq!(buf.len(), 10);
    buf.extend_from_slice(&exited.bytes[10..]);
    let got = decode(&mut buf).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].kind, msg::EXITED);
    assert!(got[0].payload.is_empty());
    assert!(buf.is_empty());
    // A length shorter than the header is a broken stream.
    let mut bad = exited.bytes.clone();
    bad[4] = 3;
    bad[5] = 0;
    assert!(decode(&mut bad).is_err());
}

#[test]
fn exit_messages_as_client_dispatch_exit_message_reads_them() {
    assert_eq!(exit_message(&[]), None);
    assert_eq!(exit_message(&0i32.to_ne_bytes()), None);
    let mut p = 1i32.to_ne_bytes().to_vec();
    p.extend_from_slice(b"server exited\0");
    assert_eq!(exit_message(&p).as_deref(), Some("server exited"));
}

#[test]
#[cfg(target_endian = "little")]
fn file_requests_are_refused_by_stream() {
    let mut open = 7i32.to_le_bytes().to_vec();
    open.extend_from_slice(&(-1i32).to_le_bytes());
    open.extend_from_slice(b"/some/path\0");
    assert_eq!(stream_of(&open), Some(7));
    assert_eq!(stream_of(&[1, 2]), None);
    let m = refuse_file(msg::READ_DONE, 7, 9).unwrap();
    let mut want = header(302, 24, false);
    want.extend_from_slice(&7i32.to_le_bytes());
    want.extend_from_slice(&9i32.to_le_bytes());
    assert_eq!(m.bytes, want);
}
