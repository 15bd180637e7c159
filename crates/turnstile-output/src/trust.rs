//! What a tool declares about itself, and whether its server is trusted to
//! say it.

/// What a tool's `annotations` in `tools/list` declare about its effects.
/// `None` is a hint the tool did not give (MCP's defaults are
/// `readOnlyHint: false`, `destructiveHint: true`). Hints, never decisions:
/// they may hold a call for approval, never exempt one
/// (`tables/hold.ron`, the approval policy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
}

/// What a turn knows about a tool before calling it: whether its server is
/// trusted (configuration) and the annotations it declared, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolTrust {
    /// `trusted = false` on the server's configuration makes a tool that
    /// declares no annotations wait for approval of each call.
    pub server_trusted: bool,
    /// `None`: the tool declared no annotations at all (or its server has
    /// not answered `tools/list`).
    pub hints: Option<Hints>,
    /// The licence tier the tool declared in its `tools/list` `_meta`
    /// (`turnstile/licence_tier`); the config's `licence_tier` wins over it.
    pub declared_tier: Option<String>,
}

impl Default for ToolTrust {
    fn default() -> Self {
        ToolTrust {
            server_trusted: true,
            hints: None,
            declared_tier: None,
        }
    }
}
