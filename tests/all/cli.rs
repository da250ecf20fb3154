//! The real binary on real files: gen reproduces the committed fixtures, info's JSON contract,
//! exit statuses.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn fixture_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.strip_suffix(".args").map(str::to_string)
        })
        .collect();
    v.sort();
    assert!(!v.is_empty());
    v
}

#[test]
fn gen_reproduces_every_fixture_byte_for_byte() {
    for name in fixture_names() {
        let args = std::fs::read_to_string(fixtures().join(format!("{name}.args"))).unwrap();
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join(&name);
        bin()
            .arg("gen")
            .arg(&dir)
            .args(args.split_whitespace())
            .assert()
            .success();
        let (ours, committed) = (tree(&dir), tree(&fixtures().join(&name)));
        let names = |t: &[(PathBuf, Vec<u8>)]| t.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
        assert_eq!(names(&ours), names(&committed), "{name}: file lists differ");
        for ((p, a), (_, b)) in ours.iter().zip(&committed) {
            assert!(a == b, "{name}: {} differs", p.display());
        }
    }
}

#[test]
fn gen_depends_on_the_seed_only() {
    let t = tempfile::tempdir().unwrap();
    let run = |dir: &str, seed: &str| {
        let d = t.path().join(dir);
        bin()
            .args([
                "gen",
                "--messages",
                "300",
                "--commitlog-file-size",
                "65536",
                "--seed",
                seed,
            ])
            .arg(&d)
            .assert()
            .success();
        tree(&d)
    };
    let a = run("a", "5");
    assert_eq!(a, run("b", "5"));
    assert_ne!(a, run("c", "6"));
    // refuses to write over an existing commitlog
    bin()
        .args(["gen", "--messages", "10"])
        .arg(t.path().join("a"))
        .assert()
        .code(2);
}

fn info_json(store: &Path, extra: &[&str]) -> Value {
    let out = bin()
        .arg("info")
        .arg(store)
        .arg("--json")
        .args(extra)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    // the `info` line, then the summary
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["type"], "info");
    v
}

#[test]
fn info_json_contract_on_the_fixture() {
    let store = fixtures().join("store-4.9");
    let v = info_json(&store, &[]);
    for k in [
        "commitlog",
        "topics",
        "consumer_groups",
        "index_files",
        "checkpoint",
        "clean_shutdown",
    ] {
        assert!(v.get(k).is_some(), "missing key {k}");
    }
    assert_eq!(v["clean_shutdown"], true);
    let cl = &v["commitlog"];
    assert_eq!(cl["files"].as_array().unwrap().len(), 9);
    assert_eq!(cl["min_offset"], 0);
    assert!(cl["max_offset"].as_u64().unwrap() > 2_000_000);
    // geometry came from the files and says so
    assert_eq!(v["geometry"]["index_slots"]["value"], 64);
    assert_eq!(v["geometry"]["index_slots"]["source"], "inferred");
    // each queue's max equals the number of its consume queue units
    let topics = v["topics"].as_array().unwrap();
    let order = topics.iter().find(|t| t["topic"] == "OrderTopic").unwrap();
    for q in order["queues"].as_array().unwrap() {
        let dir = store
            .join("consumequeue/OrderTopic")
            .join(q["queue_id"].to_string());
        let mut units = 0;
        for f in std::fs::read_dir(dir).unwrap() {
            let b = std::fs::read(f.unwrap().path()).unwrap();
            units += b.chunks(20).filter(|c| c.iter().any(|&x| x != 0)).count();
        }
        assert_eq!(q["max_offset"].as_u64().unwrap(), units as u64);
        assert_eq!(q["min_offset"], 0);
    }
    // lag = max - offset for every group queue
    let groups = v["consumer_groups"].as_array().unwrap();
    assert!(groups
        .iter()
        .any(|g| g["group"] == "OrderGroup" && g["topic"] == "OrderTopic"));
    for g in groups {
        for q in g["queues"].as_array().unwrap() {
            let (o, m, l) = (
                q["committed_offset"].as_i64().unwrap(),
                q["max_offset"].as_i64().unwrap(),
                q["lag"].as_i64().unwrap(),
            );
            assert_eq!(l, (m - o).max(0));
        }
    }
    assert!(v["index_files"].as_array().unwrap().len() > 3);
}

#[test]
#[cfg_attr(not(rmqstore_oracle), ignore = "needs ../shared/oracle")]
fn info_agrees_with_java_on_oracle_stores() {
    for name in ORACLES {
        let Some(dir) = oracle(name) else { continue };
        let v = info_json(&dir.join("store"), &[]);
        let q = java_queries(&dir);
        assert_eq!(v["commitlog"]["min_offset"], q["minPhyOffset"], "{name}");
        assert_eq!(v["commitlog"]["max_offset"], q["maxPhyOffset"], "{name}");
        assert_eq!(v["clean_shutdown"], !name.starts_with("crashed"), "{name}");
        if name.starts_with("basic") {
            for jq in q["queues"].as_array().unwrap() {
                let t = v["topics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|t| t["topic"] == jq["topic"])
                    .unwrap();
                let ours = t["queues"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|x| x["queue_id"] == jq["queueId"])
                    .unwrap();
                assert_eq!(ours["max_offset"], jq["maxOffsetInQueue"], "{name}");
                assert_eq!(ours["min_offset"], jq["minOffsetInQueue"], "{name}");
            }
        }
    }
}

#[test]
fn info_fails_cleanly_on_what_is_not_a_store() {
    let t = tempfile::tempdir().unwrap();
    let missing = t.path().join("nope");
    let out = bin()
        .arg("info")
        .arg(&missing)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8_lossy(&out);
    assert!(err.contains("nope"), "{err}");
    let out = bin()
        .arg("info")
        .arg(t.path())
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8_lossy(&out).contains("not a RocketMQ store"));
    // a bad broker config names the key
    let conf = t.path().join("broker.conf");
    std::fs::write(&conf, "maxIndexNum=lots\n").unwrap();
    let out = bin()
        .arg("info")
        .arg(fixtures().join("store-4.9"))
        .arg("--broker-conf")
        .arg(&conf)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8_lossy(&out).contains("maxIndexNum"));
}

#[test]
fn flags_override_inferred_geometry() {
    let v = info_json(
        &fixtures().join("store-4.9"),
        &["--index-slots", "64", "--index-entries", "256"],
    );
    assert_eq!(v["geometry"]["index_slots"]["source"], "flag");
    assert_eq!(v["geometry"]["cq_file_units"]["source"], "inferred");
}

const SUBCOMMANDS: [&str; 13] = [
    "gen", "dump", "query", "info", "pull", "pending", "rebuild", "repair", "export", "replay",
    "tui", "verify", "trace",
];

fn stdout_of(args: &[&str]) -> String {
    let o = bin().args(args).assert().success();
    String::from_utf8(o.get_output().stdout.clone()).unwrap()
}

#[test]
fn completion_scripts_know_every_subcommand_and_option() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell}: no {sub}");
        }
        assert!(script.contains("in-place"), "{shell}: no repair --in-place");
    }
    bin().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn the_manual_page_has_every_subcommand_and_its_options() {
    let page = stdout_of(&["man"]);
    assert!(
        page.contains(".TH rmqstore 1"),
        "{}",
        &page[..200.min(page.len())]
    );
    assert_eq!(page.matches(".TH ").count(), 1, "one page");
    for sub in SUBCOMMANDS {
        assert!(
            page.contains(&format!("rmqstore\\-{sub}")),
            "no section for {sub}"
        );
    }
    assert!(
        page.contains("\\-\\-explain\\-recovery"),
        "verify's options are missing"
    );
    assert!(
        page.contains("\\-\\-dry\\-run"),
        "repair's options are missing"
    );
}

/// Run `args` on the 4.9 fixture store; (exit code, stdout, stderr).
fn on_fixture(args: &[&str]) -> (i32, String, String) {
    let store = fixtures().join("store-4.9");
    let (cmd, rest) = args.split_first().unwrap();
    let o = bin().arg(cmd).arg(&store).args(rest).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        said(&o.stderr),
    )
}

#[test]
fn unknown_names_are_errors_that_say_what_is_unknown_and_what_is_close() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["query", "--topic", "NoSuchTopic", "--key", "x"],
            &["unknown topic \"NoSuchTopic\"", "known: ", "\"OrderTopic\""],
        ),
        (
            &["query", "--topic", "OrderTopik", "--key", "x"],
            &["did you mean \"OrderTopic\"?"],
        ),
        (
            &["query", "--topic", "ordertopic", "--begin", "0"],
            &["did you mean \"OrderTopic\"?"],
        ),
        (
            &["query", "--msg-id", "ZZZZ"],
            &["not a message id: \"ZZZZ\"", "32 hex digits"],
        ),
        (
            &[
                "query",
                "--topic",
                "OrderTopic",
                "--queue",
                "9",
                "--offset",
                "0",
            ],
            &["unknown queue OrderTopic/9", "0, 1, 2, 3"],
        ),
        (
            &["pending", "--group", "NoSuchGroup"],
            &["unknown consumer group \"NoSuchGroup\"", "\"OrderGroup\""],
        ),
        (
            &["pending", "--group", "OrderGrup", "--json"],
            &["did you mean \"OrderGroup\"?"],
        ),
        (
            &["pull", "--group", "NoSuchGroup", "--topic", "OrderTopic"],
            &[
                "unknown consumer group \"NoSuchGroup\"",
                "--from first|last|TIME",
            ],
        ),
        (
            &["pull", "--group", "OrderGroup", "--topic", "OrderTopik"],
            &["did you mean \"OrderTopic\"?"],
        ),
    ];
    let out = tempfile::tempdir().unwrap();
    let jsonl = out.path().join("x.jsonl");
    let jsonl = jsonl.to_str().unwrap();
    let more: &[(&[&str], &[&str])] = &[
        (
            &["export", "-g", "OrderGrup", "--out", jsonl],
            &["did you mean \"OrderGroup\"?", "name its topic (--topic)"],
        ),
        (
            &[
                "replay",
                "-g",
                "NoSuchGroup",
                "--exec",
                "true",
                "--until-idle",
            ],
            &[
                "unknown consumer group \"NoSuchGroup\"",
                "name its topic (--topic)",
            ],
        ),
    ];
    for (args, words) in cases.iter().chain(more) {
        let (code, stdout, stderr) = on_fixture(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?} printed {stdout}");
        for w in *words {
            assert!(stderr.contains(w), "{args:?}: {w:?} not in {stderr}");
        }
    }
    // a new group may pull when it says where to start
    let (code, _, stderr) = on_fixture(&[
        "pull",
        "--group",
        "NewGroup",
        "--topic",
        "OrderTopic",
        "--queue",
        "0",
        "--from",
        "first",
    ]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn pending_for_one_group_shows_only_what_concerns_it() {
    // JSON Lines by type: `group`, `delay_level`, `transaction`, then the summary
    let lines = |args: &[&str]| -> Vec<Value> {
        let (code, out, err) = on_fixture(args);
        assert_eq!(code, 0, "{err}");
        out.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let of = |v: &[Value], t: &str| -> Vec<Value> {
        v.iter().filter(|l| l["type"] == t).cloned().collect()
    };
    let delayed_to = |v: &[Value]| -> Vec<String> {
        of(v, "delay_level")
            .iter()
            .flat_map(|l| l["messages"].as_array().unwrap().clone())
            .map(|m| m["real_topic"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let all = lines(&["pending", "--json"]);
    let one = lines(&["pending", "--group", "AuditGroup", "--json"]);
    let groups: Vec<Value> = of(&one, "group")
        .iter()
        .map(|g| g["group"].clone())
        .collect();
    assert_eq!(groups, ["AuditGroup"]);
    let mine = delayed_to(&one);
    assert!(!mine.is_empty());
    assert!(mine.iter().all(|t| t == "AuditTopic"), "{mine:?}");
    assert!(delayed_to(&all).iter().any(|t| t == "OrderTopic"));
    // the undecided transactions are bound for PaymentTopic, not AuditGroup's
    assert!(!of(&all, "transaction").is_empty());
    assert!(of(&one, "transaction").is_empty());
    let pay = lines(&["pending", "--group", "PaymentGroup", "--json"]);
    assert_eq!(of(&pay, "transaction"), of(&all, "transaction"));
}

#[test]
fn kcat_style_short_flags_format_lines_and_raw_bodies() {
    use base64::Engine;
    let json_args = [
        "query",
        "-t",
        "OrderTopic",
        "-q",
        "0",
        "-o",
        "0",
        "-c",
        "40",
        "--body",
        "base64",
        "-J",
    ];
    let (code, stdout, _) = on_fixture(&json_args);
    assert_eq!(code, 0);
    let messages: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("topic").is_some())
        .collect();
    assert_eq!(messages.len(), 40);
    // one line per message from the template, the summary on stderr
    let (code, stdout, stderr) = on_fixture(&[
        "query",
        "-t",
        "OrderTopic",
        "-q",
        "0",
        "-o",
        "0",
        "-c",
        "40",
        "-f",
        "%t %q %o %O %u %T|%%",
    ]);
    assert_eq!(code, 0);
    assert!(stderr.contains("-- query: queue offset"), "{stderr}");
    let want: Vec<String> = messages
        .iter()
        .map(|m| {
            format!(
                "{} {} {} {} {} {}|%",
                m["topic"].as_str().unwrap(),
                m["queue_id"],
                m["queue_offset"],
                m["commitlog_offset"],
                m["uniq_key"].as_str().unwrap_or(""),
                m["store_timestamp"]
            )
        })
        .collect();
    assert_eq!(stdout.lines().collect::<Vec<_>>(), want);
    // raw bodies, each followed by a newline, nothing else on stdout
    let store = fixtures().join("store-4.9");
    let o = bin()
        .args(["query"])
        .arg(&store)
        .args(["--topic", "OrderTopic", "--queue", "0", "--offset", "0"])
        .args(["--count", "40", "--body-only"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let mut want = Vec::new();
    for m in &messages {
        let b64 = m["body"].as_str().unwrap();
        want.extend(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        );
        want.push(b'\n');
    }
    assert!(messages
        .iter()
        .any(|m| !m["body_decompressed_from"].is_null()));
    assert_eq!(o.stdout, want);
    // bad templates are refused with the token named
    let (code, _, stderr) = on_fixture(&[
        "query",
        "-t",
        "OrderTopic",
        "-q",
        "0",
        "-o",
        "0",
        "-f",
        "%x",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown token %x"), "{stderr}");
}

#[test]
fn every_subcommand_help_has_exit_statuses_and_examples() {
    let subcommands = [
        "gen",
        "offsets",
        "config",
        "dump",
        "dump commitlog",
        "dump consumequeue",
        "dump index",
        "dump checkpoint",
        "dump config",
        "query",
        "info",
        "pull",
        "pending",
        "rebuild",
        "repair",
        "export",
        "replay",
        "verify",
        "completions",
        "man",
    ];
    for sub in subcommands {
        let o = bin().args(sub.split(' ')).arg("--help").output().unwrap();
        assert!(o.status.success(), "{sub}");
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(help.contains("Exit status: 0 "), "{sub}: {help}");
        let status = help.split("Examples:").next().unwrap_or_default();
        let status = status.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(status.contains("; 2 could not run"), "{sub}: {help}");
        let examples = help
            .lines()
            .filter(|l| l.starts_with(&format!("  rmqstore {sub} ")))
            .count();
        assert!(examples >= 2, "{sub}: {examples} examples in {help}");
    }
    let o = bin().arg("--version").output().unwrap();
    let v = String::from_utf8_lossy(&o.stdout);
    assert!(
        v.starts_with("rmqstore 0.") && v.contains(" (commit "),
        "{v}"
    );
}

#[test]
fn completions_and_man_exit_2_on_an_output_that_fails_and_0_on_a_closed_pipe() {
    use std::process::{Command, Stdio};
    let exe = assert_cmd::cargo::cargo_bin("rmqstore");
    for args in [&["completions", "bash"][..], &["man"][..]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = Command::new(&exe).args(args).stdout(full).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stderr.contains("No space left"), "{args:?}: {stderr}");
        let mut child = Command::new(&exe)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn errors_are_said_in_words_and_coloured_only_when_asked() {
    let o = bin().args(["info", "/nonexistent-store"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "rmqstore: error: /nonexistent-store: no such directory"
    );
    let o = bin()
        .args(["dump", "commitlog", "/nonexistent-store"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "rmqstore: error: /nonexistent-store: no such file or directory"
    );
    let o = bin()
        .args(["tui"])
        .arg(fixtures().join("store-4.9"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("tui: standard output is not a terminal"));
    let o = bin()
        .args(["info", "/nonexistent-store", "--color", "always"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("rmqstore: \x1b[1;31merror:\x1b[0m"));
    // a store with an error: ERROR painted red with --color always, never otherwise
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("store");
    copy_tree(&fixtures().join("store-4.9"), &store);
    let cq = store.join("consumequeue/OrderTopic/0/00000000000000000000");
    let mut bytes = std::fs::read(&cq).unwrap();
    bytes[8..12].copy_from_slice(&(-5i32).to_be_bytes()); // first unit's size
    std::fs::write(&cq, bytes).unwrap();
    let verify = |extra: &[&str], env: Option<(&str, &str)>| {
        let mut c = bin();
        c.arg("verify").arg(&store).args(extra);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(1));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(verify(&["--color", "always"], Some(("NO_COLOR", "1")))
        .contains("\x1b[1;31mERROR  \x1b[0m"));
    for (extra, env) in [
        (&[][..], None),
        (&["--color", "never"][..], None),
        (&["--color", "auto"][..], Some(("NO_COLOR", "1"))),
    ] {
        let out = verify(extra, env);
        assert!(
            out.contains("ERROR  ") && !out.contains('\x1b'),
            "{extra:?}: {out}"
        );
    }
}

/// A negative offset is refused by name (not with clap's `-- -5` tip or "invalid digit"), never
/// planned as 0; a time window takes --count.
#[test]
fn negative_offsets_are_refused_and_a_time_window_takes_count() {
    let store = fixtures().join("store-4.9");
    let s = store.to_str().unwrap();
    for args in [
        vec!["query", s, "-t", "OrderTopic", "-q", "0", "-o", "-5"],
        vec!["query", s, "-t", "OrderTopic", "-q", "0", "--offset=-5"],
        vec!["dump", "commitlog", s, "-o", "-5"],
        vec!["dump", "consumequeue", s, "-t", "OrderTopic", "--from=-1"],
        vec![
            "offsets",
            s,
            "set",
            "-g",
            "OrderGroup",
            "-t",
            "OrderTopic",
            "--to-offset=-3",
        ],
        vec![
            "offsets",
            s,
            "set",
            "-g",
            "OrderGroup",
            "-t",
            "OrderTopic",
            "--to-offset",
            "-3",
        ],
    ] {
        let o = bin().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("must be 0 or more"), "{args:?}: {err}");
        assert!(!err.contains("-- -"), "{args:?}: {err}");
    }
    let o = bin()
        .args([
            "query",
            s,
            "-t",
            "OrderTopic",
            "-q",
            "0",
            "--begin",
            "0",
            "-c",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 2);
}

/// A part of a store given where the root is meant says which folder is the root.
#[test]
fn a_part_of_a_store_names_its_root() {
    let store = fixtures().join("store-4.9");
    for part in [
        "commitlog",
        "consumequeue",
        "config",
        "commitlog/00000000000000000000",
    ] {
        let o = bin().arg("info").arg(store.join(part)).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{part}: {err}");
        assert!(
            err.contains(&format!("part of the store root {}", store.display())),
            "{part}: {err}"
        );
    }
}
