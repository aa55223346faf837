//! Protocol modules: what one delegation protocol brings to the gateway,
//! as one registration value ([`Module`]), and how the binary drives a list
//! of them without naming any.
//!
//! A module carries its config section (its name; how it reads and checks
//! its own section, errors naming the full key), how it is built from the
//! gateway's context ([`Services`]), how a reloaded section is applied, the
//! [`Protocol`](dgw_core::protocol::Protocol) it registers (with the
//! JSON-RPC methods, MCP tools and HTTP paths that protocol serves), and
//! its `dgw <section> …` commands. Config loading, `serve`, reload,
//! `dgw config check` and the command line iterate the list.

pub mod command;
mod module;
mod section;

pub use command::{CommandError, Exit};
pub use module::{Module, Panel, PanelFuture, Running, Services, Staged};
pub use section::{section, Document, SectionError};
