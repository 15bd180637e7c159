//! One tool's settings (`[mcp_servers.tools.NAME]`), as the file says them
//! and as the judge reads them. A tool's part in a protocol is a typed
//! variant (issue 36 §3): `approval = "before-call"`, `"none"`, or
//! `approval.prepare = { action_id, confirm, cancel, status }`;
//! `terminal.capability = { preview, path_template, … }`. A key of one
//! variant cannot be set beside another, and serde names what is missing
//! or unknown at its line and column; what serde cannot know (a path's
//! syntax, a capability rule, a card's template) is checked here.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::settings::{McpServer, ToolSettings, Validator};
use crate::judge::approval::{Prepare, ToolRole};
use crate::judge::capability::{CapabilityRule, RuleError, TerminalFlow};
use crate::judge::card::{Template, Wording};
use crate::judge::contracts::{AccountingKeys, AccountingMode, Shape};
use crate::judge::deep_link::DeepLinkMap;
use crate::judge::{path, Contract};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTool {
    licence_tier: Option<String>,
    /// The tool's results have a result contract (see `judge::contracts`).
    #[serde(default)]
    result_contract: bool,
    #[serde(default)]
    fixed_prefixes: Vec<String>,
    #[serde(default)]
    stitch: bool,
    /// A call that hit an expired MCP session may be re-sent once on the new
    /// session (ADR 0011).
    #[serde(default)]
    retry_safe: bool,
    /// `required` (default) or `absent`: whether the server sends accounting.
    accounting: Option<AccountingMode>,
    /// Dotted path to the items in the result JSON; detected when unset.
    items_path: Option<String>,
    /// Dotted path to the one object a record answer describes; the whole
    /// answer (its nested fields flattened) when unset.
    record_path: Option<String>,
    /// The item field that identifies an item (default `id`), a dotted path.
    id_field: Option<String>,
    /// The input parameter taking a list of item ids, for narrowing.
    scope_ids_param: Option<String>,
    /// Renames of the accounting keys.
    accounting_keys: Option<FileAccountingKeys>,
    /// The tool's role in the approval protocol.
    approval: Option<FileApproval>,
    /// The terminal flow this tool confirms.
    terminal: Option<FileTerminal>,
    /// The approval card's question in the user's terms, with `{field}`
    /// from the call's arguments, then from the prepare's result
    /// ("Reserve seat {seat} at {time}?").
    summary: Option<String>,
    /// Its Korean wording (default: `summary`).
    summary_ko: Option<String>,
    /// Where each cited item keeps the parts of its deep link (issue 38).
    deep_link: Option<FileDeepLink>,
}

/// `deep_link = { panorama = "id", surface = "floor", camera = "camera", … }`:
/// dotted paths into one cited item.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDeepLink {
    facility: Option<String>,
    project: Option<String>,
    surface: Option<String>,
    panorama: Option<String>,
    axes: Option<String>,
    camera: Option<String>,
}

/// A tool's role in the approval protocol, one variant per role.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum FileApproval {
    /// It prepares a backend action that a decision settles with the
    /// tools it names.
    Prepare(FilePrepare),
    /// The exact call waits for the user's approval.
    BeforeCall,
    /// Never held, whatever its annotations declare.
    None,
}

/// What settles a prepared action.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePrepare {
    /// The result field carrying the action's id: a dotted path,
    /// `actionId` or `data.bookingId`.
    action_id: String,
    /// The tool that confirms it; never run from a model's plan.
    confirm: String,
    /// The tool that cancels it (a denial's effect).
    cancel: String,
    /// The tool that says what became of a confirmed action.
    status: Option<String>,
}

/// A terminal flow this tool confirms, one variant per kind of delivery.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum FileTerminal {
    /// An export whose answer is a capability URL code delivers
    /// (docs/export.md).
    Capability(FileCapability),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCapability {
    /// The tool whose answer this confirm must follow, in an earlier step.
    preview: String,
    /// The capability's path, e.g. `/api/lms/exports/{jobId}/download`.
    path_template: String,
    /// The capability's token parameter (default `token`).
    token_param: Option<String>,
    /// The `data` field carrying the URL (default `downloadUrl`), a dotted
    /// path inside `data`.
    url_field: Option<String>,
    /// The download button's name (default "Download files").
    label: Option<String>,
    /// Its name for a Korean-speaking user (default: `label`).
    label_ko: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAccountingKeys {
    returned: Option<String>,
    total: Option<String>,
    total_lower_bound: Option<String>,
    has_more: Option<String>,
    next_cursor: Option<String>,
}

/// The keys a tool took before its roles were typed, and where each lives
/// now: an old configuration is told how to say it, not only that the key
/// is unknown.
pub(super) fn moved_key_hint(message: &str) -> Option<&'static str> {
    const PREPARE: &[&str] = &["action_id", "confirm", "cancel", "status"];
    const CAPABILITY: &[&str] = &[
        "preview",
        "path_template",
        "token_param",
        "url_field",
        "label",
        "label_ko",
    ];
    // Only a tool's own table: its list of expected keys names
    // `result_contract` (a `[limits]` or a capability's table does not).
    let in_tool = message.contains("`result_contract`");
    let named = |k: &&str| in_tool && message.contains(&format!("unknown field `{k}`"));
    if PREPARE.iter().any(named) {
        return Some("a prepare tool's keys are its role's: approval.prepare = { action_id = \"actionId\", confirm = \"…\", cancel = \"…\", status = \"…\" } (docs/configuration.md)");
    }
    if CAPABILITY.iter().any(named) {
        return Some("a terminal flow's keys are its own: terminal.capability = { preview = \"…\", path_template = \"…\" } (docs/configuration.md)");
    }
    // `approval = "prepare"` or `terminal = "capability"` alone: a variant
    // that needs its keys.
    if message.contains("expected newtype variant") {
        return Some("this variant takes its keys: approval.prepare = { action_id = \"…\", confirm = \"…\", cancel = \"…\" }, terminal.capability = { preview = \"…\", path_template = \"…\" } (docs/configuration.md)");
    }
    None
}

/// A name that must say something.
fn named(v: &str) -> Option<&str> {
    Some(v.trim()).filter(|v| !v.is_empty())
}

impl Validator {
    /// One tool's settings, each part checked by what reads it.
    pub(super) fn tool(
        &mut self,
        key: &str,
        server: &str,
        origin: Option<&str>,
        t: &FileTool,
    ) -> ToolSettings {
        let licence_tier = match t.licence_tier.as_deref().map(str::trim) {
            Some("") => {
                self.problem(&format!("{key}.licence_tier"), "must not be empty".into());
                None
            }
            other => other.map(str::to_string),
        };
        let reading = t.accounting.is_some()
            || t.items_path.is_some()
            || t.record_path.is_some()
            || t.id_field.is_some()
            || t.scope_ids_param.is_some()
            || t.accounting_keys.is_some()
            || t.deep_link.is_some();
        if !t.result_contract && (t.stitch || !t.fixed_prefixes.is_empty() || reading) {
            self.problem(
                &format!("{key}.result_contract"),
                "`stitch`, `fixed_prefixes`, `accounting`, `items_path`, `record_path`, `id_field`, `scope_ids_param`, `accounting_keys` and `deep_link` describe a result contract: set result_contract = true".into(),
            );
        }
        let contract = t.result_contract.then(|| self.contract(key, t));
        let approval = t.approval.as_ref().map(|a| self.approval(key, a));
        let terminal = (t.terminal.as_ref()).and_then(|f| self.terminal(key, server, origin, f));
        let summary = self.summary(key, t, approval.as_ref());
        ToolSettings {
            licence_tier,
            contract,
            retry_safe: t.retry_safe,
            approval,
            terminal,
            summary,
        }
    }

    /// A tool's result contract, with how its answers are read.
    fn contract(&mut self, key: &str, t: &FileTool) -> Contract {
        let mut name = |field: &str, v: &Option<String>| -> Option<String> {
            match v.as_deref().map(str::trim) {
                Some("") => {
                    self.problem(&format!("{key}.{field}"), "must not be empty".into());
                    None
                }
                other => other.map(str::to_string),
            }
        };
        let items_path = name("items_path", &t.items_path);
        let record_path = name("record_path", &t.record_path);
        let id_field = name("id_field", &t.id_field);
        let scope_ids_param = name("scope_ids_param", &t.scope_ids_param);
        let mut keys = AccountingKeys::default();
        if let Some(k) = &t.accounting_keys {
            let at = |f: &str| format!("accounting_keys.{f}");
            let mut set = |slot: &mut String, f: &str, v: &Option<String>| {
                if let Some(v) = name(&at(f), v) {
                    *slot = v;
                }
            };
            set(&mut keys.returned, "returned", &k.returned);
            set(&mut keys.total, "total", &k.total);
            set(
                &mut keys.total_lower_bound,
                "total_lower_bound",
                &k.total_lower_bound,
            );
            set(&mut keys.has_more, "has_more", &k.has_more);
            set(&mut keys.next_cursor, "next_cursor", &k.next_cursor);
        }
        // The paths a contract reads answers by: a malformed one would
        // never match, and is refused here rather than met in a turn.
        for (field, v) in [("record_path", &record_path), ("id_field", &id_field)] {
            if let Some(Err(e)) = v.as_deref().map(path::check) {
                self.problem(&format!("{key}.{field}"), e.to_string());
            }
        }
        let deep_link = t.deep_link.as_ref().map(|d| DeepLinkMap {
            facility: d.facility.clone(),
            project: d.project.clone(),
            surface: d.surface.clone(),
            panorama: d.panorama.clone(),
            axes: d.axes.clone(),
            camera: d.camera.clone(),
        });
        if let Some(m) = &deep_link {
            if m.paths().next().is_none() {
                self.problem(
                    &format!("{key}.deep_link"),
                    "names no part: give at least one of facility, project, surface, panorama"
                        .into(),
                );
            }
            for (part, p) in m.paths() {
                if let Err(e) = path::check(p) {
                    self.problem(&format!("{key}.deep_link.{part}"), e.to_string());
                }
            }
        }
        Contract {
            fixed_prefixes: t.fixed_prefixes.clone(),
            stitch: t.stitch,
            accounting: t.accounting.unwrap_or_default(),
            shape: Shape {
                items_path,
                record_path,
                id_field,
                keys,
                deep_link,
            },
            scope_ids_param,
        }
    }

    /// A tool's approval role. A prepare's names must say something, and
    /// its action id must be a path that can match.
    fn approval(&mut self, key: &str, a: &FileApproval) -> ToolRole {
        let p = match a {
            FileApproval::BeforeCall => return ToolRole::BeforeCall,
            FileApproval::None => return ToolRole::Exempt,
            FileApproval::Prepare(p) => p,
        };
        let at = format!("{key}.approval.prepare");
        let mut need = |k: &str, v: &str| match named(v) {
            Some(v) => v.to_string(),
            None => {
                self.problem(&format!("{at}.{k}"), "must not be empty".into());
                String::new()
            }
        };
        let action_id = need("action_id", &p.action_id);
        let confirm = need("confirm", &p.confirm);
        let cancel = need("cancel", &p.cancel);
        let status = match p.status.as_deref() {
            Some(s) => Some(need("status", s)).filter(|s| !s.is_empty()),
            None => None,
        };
        // A path that can never match is refused now: at run time it would
        // only ever be a missing field.
        if let (false, Err(e)) = (action_id.is_empty(), path::check(&action_id)) {
            self.problem(&format!("{at}.action_id"), e.to_string());
        }
        ToolRole::Prepare(Prepare {
            action_id,
            confirm,
            cancel,
            status,
        })
    }

    /// A terminal flow: its capability must make a rule
    /// `judge::capability` can hold answers to, against the server's
    /// `trusted_origin`.
    fn terminal(
        &mut self,
        key: &str,
        server: &str,
        origin: Option<&str>,
        flow: &FileTerminal,
    ) -> Option<TerminalFlow> {
        let FileTerminal::Capability(c) = flow;
        let at = format!("{key}.terminal.capability");
        let preview = named(&c.preview).map(str::to_string);
        if preview.is_none() {
            self.problem(&format!("{at}.preview"), "must not be empty: it names the tool whose preview the confirm follows (e.g. preview = \"export_all_lms_materials\")".into());
        }
        let Some(template) = named(&c.path_template) else {
            self.problem(&format!("{at}.path_template"), "must not be empty: it is the capability's path (e.g. path_template = \"/api/lms/exports/{jobId}/download\")".into());
            return None;
        };
        let Some(origin) = origin else {
            self.problem(
                &format!("{server}.trusted_origin"),
                "a terminal flow's capability is checked against its server's trusted_origin: set it".into(),
            );
            return None;
        };
        let token = c.token_param.as_deref().and_then(named).unwrap_or("token");
        let rule = match CapabilityRule::new(origin, template, token) {
            Ok(rule) => rule,
            Err(e) => {
                let k = match e {
                    RuleError::Token(_) => "token_param",
                    RuleError::Template(_) => "path_template",
                    RuleError::Origin(_) => "",
                };
                let field = match k {
                    "" => at.clone(),
                    k => format!("{at}.{k}"),
                };
                self.problem(&field, e.to_string());
                return None;
            }
        };
        let rule = match c.url_field.as_deref().and_then(named) {
            Some(f) => {
                if let Err(e) = path::check(f) {
                    self.problem(&format!("{at}.url_field"), e.to_string());
                }
                rule.with_url_field(f)
            }
            None => rule,
        };
        Some(TerminalFlow {
            preview: preview?,
            rule,
            label: (c.label.as_deref().and_then(named))
                .unwrap_or("Download files")
                .to_string(),
            label_ko: c.label_ko.as_deref().and_then(named).map(str::to_string),
        })
    }

    /// A tool that confirms, cancels or reports on a prepared action is
    /// governed by that prepare tool: it may not also be `before-call`,
    /// `none` or a prepare tool itself (a confirm made runnable from a
    /// model's plan would send without a human's decision).
    pub(super) fn settling_roles_stand(&mut self, servers: &[McpServer]) {
        let mut settles = BTreeMap::new();
        for s in servers {
            for (tool, t) in &s.tools {
                if let Some(ToolRole::Prepare(p)) = &t.approval {
                    let named = [Some(&p.confirm), Some(&p.cancel), p.status.as_ref()];
                    for n in named.into_iter().flatten() {
                        settles.insert(n.clone(), tool.clone());
                    }
                }
            }
        }
        for s in servers {
            for (tool, t) in &s.tools {
                if let (Some(prepare), Some(_)) = (settles.get(tool), &t.approval) {
                    self.problem(
                        &format!("mcp_servers.tools.{tool}.approval"),
                        format!("`{tool}` settles what `{prepare}` prepares (its confirm, cancel or status tool), so it takes no approval role of its own"),
                    );
                }
                if let (Some(prepare), Some(_)) = (settles.get(tool), &t.summary) {
                    self.problem(
                        &format!("mcp_servers.tools.{tool}.summary"),
                        format!("`{tool}` settles what `{prepare}` prepares, and its calls are never shown on a card: word the card on `{prepare}`"),
                    );
                }
            }
        }
    }

    /// A tool's card wording: `summary` (and `summary_ko`) read as
    /// templates. What can be known before any call is checked here: the
    /// templates' syntax, a field that names a secret or the action id (the
    /// detail line's), a wording that no card would show. A field the call
    /// and its result turn out not to have falls back to the default
    /// wording at run time, logged by this key.
    fn summary(&mut self, key: &str, t: &FileTool, approval: Option<&ToolRole>) -> Option<Wording> {
        let mut read = |which: &str, text: &Option<String>| -> Option<Template> {
            let text = text.as_ref()?;
            match Template::parse(text) {
                Ok(t) => Some(t),
                Err(e) => {
                    self.problem(&format!("{key}.{which}"), e.to_string());
                    None
                }
            }
        };
        let en = read("summary", &t.summary);
        let ko = read("summary_ko", &t.summary_ko);
        if t.summary.is_none() && t.summary_ko.is_some() {
            self.problem(
                &format!("{key}.summary_ko"),
                "a Korean wording needs the `summary` it translates".into(),
            );
        }
        if let Some(ToolRole::Prepare(p)) = approval {
            for (which, tpl) in [("summary", &en), ("summary_ko", &ko)] {
                let names_id = tpl
                    .iter()
                    .flat_map(|t| t.fields())
                    .any(|f| f == p.action_id || f == p.id_arg());
                if names_id {
                    self.problem(
                        &format!("{key}.{which}"),
                        format!("`{{{}}}` is the action id, which the card's detail line shows; word the question with the fields a user knows", p.action_id),
                    );
                }
            }
        }
        if t.summary.is_some() && matches!(approval, Some(ToolRole::Exempt)) {
            self.problem(
                &format!("{key}.summary"),
                "a tool with approval = \"none\" is never held, so no card shows this".into(),
            );
        }
        Some(Wording { en: en?, ko })
    }
}
