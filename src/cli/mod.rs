//! Command-line front ends. Each command parses its input, calls the library
//! and decides output and exit codes; none holds a protocol decision.

pub mod chat;
pub mod demo;
pub mod mcp;
pub mod serve;
pub mod tables;
