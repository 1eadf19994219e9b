//! The trust settings of a config (docs/SECURITY.md): `[acl]` groups and the
//! `dest_list_allow` / `dest_list_deny` lists naming them are checked and
//! expanded, or refused with a reason, never a panic; what is accepted is
//! only valid patterns, each once, at most `MAX_ACL_PATTERNS`. Token files
//! are read or refused the same way; what is read has no line end, and a
//! token `check_token` accepts is printable ASCII. Entries are drawn from a small alphabet half the time,
//! so that group names that name each other (and cycles) are frequent.
#![no_main]

use cumulo_config::{check_token, expand_acl, read_token_file, AclGroups, MAX_ACL_PATTERNS};
use libfuzzer_sys::fuzz_target;

const ALPHABET: &[u8] = b"ab/*?/ab/cx";

fn entry(mapped: bool, raw: &[u8]) -> String {
    match mapped {
        true => raw.iter().take(12).map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char).collect(),
        false => String::from_utf8_lossy(raw).into_owned(),
    }
}

fuzz_target!(|input: (bool, Vec<(Vec<u8>, Vec<Vec<u8>>)>, Vec<Vec<u8>>, Vec<u8>)| {
    let (mapped, groups_in, list_in, token_bytes) = input;
    let mut groups = AclGroups::new();
    for (name, entries) in groups_in.iter().take(16) {
        groups.insert(entry(mapped, name), entries.iter().take(16).map(|e| entry(mapped, e)).collect());
    }
    let list: Vec<String> = list_in.iter().take(16).map(|e| entry(mapped, e)).collect();
    match expand_acl(&list, &groups) {
        Err(why) => assert!(!why.is_empty()),
        Ok(patterns) => {
            assert!(patterns.len() <= MAX_ACL_PATTERNS);
            for (i, p) in patterns.iter().enumerate() {
                assert!(p.starts_with('/'), "{p:?} from {list:?} {groups:?}");
                assert!(cumulo_pattern::validate(p).is_ok(), "{p:?}");
                assert!(!patterns[..i].contains(p), "{p:?} twice");
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("cumulo-fuzz-token-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("t.token");
    if std::fs::write(&path, &token_bytes).is_ok() {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
        if let Ok(token) = read_token_file(&path) {
            assert!(!token.is_empty() && !token.ends_with('\n'), "{token:?}");
            if check_token(&token).is_ok() {
                assert!(token.len() >= 16 && token.bytes().all(|b| b.is_ascii_graphic()), "{token:?}");
            }
        }
    }
});
