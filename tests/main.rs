//! Every integration test, in one binary (`autotests = false` in
//! Cargo.toml): `tests/<name>.rs` is the module `<name>`, and they share
//! [`common`]. One binary compiles `common` once and links once; one binary
//! per file compiled it and linked a 250 MB executable for each of them, on
//! every change to `src/`.
//!
//! `cargo test` runs them all; `cargo test --test all http_turns::` runs one
//! file's. `tests/architecture.rs` is its own target (Cargo.toml). A new
//! file here must be added below: [`every_test_file_is_a_module_of_this_binary`]
//! fails until it is.

mod common;

mod approval;
mod approval_kill;
mod browser;
mod capability;
mod cli_output;
mod conformance;
mod connections;
mod crash;
mod demo_auth;
mod demo_start;
mod demo_tools;
mod drain;
mod export;
mod forbidden_rows;
mod frontends;
mod fuzz;
mod guardrails;
mod harness;
mod honesty;
mod http_hardening;
mod http_turns;
mod identity;
mod interop_honesty;
mod judge_bugs;
mod judge_props;
mod lease;
mod licence;
mod log_fields;
mod mcp_interop;
mod mcp_reconnect;
mod mcp_revisions;
mod narration_guard;
mod nested_fields;
mod oidc;
mod openai_adapter;
mod otel;
mod outcomes;
mod own_sentences;
mod questions;
mod reconnect;
mod secrets;
mod show_more;
mod store;
mod table_machines;
mod table_tooling;
mod table_validation;
mod tasks;
mod turn_loop;
mod turn_script;
mod verifier;

/// A `tests/*.rs` file that is neither a module here nor a target of its
/// own in Cargo.toml would never run: `autotests = false` does not find it.
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let main = include_str!("main.rs");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(dir.join("tests")).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".rs"))
        else {
            continue;
        };
        let own_target = manifest.contains(&format!("path = \"tests/{name}.rs\""));
        if !own_target && !main.contains(&format!("\nmod {name};\n")) {
            missing.push(name.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "tests/{{{}}}.rs would never run: add `mod …;` to tests/main.rs",
        missing.join(",")
    );
}
