//! One running turn per thread (in this process). Two turns interleaving on
//! one thread would mix their messages, and a narrowing follow-up could read
//! the other turn's population.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
pub struct ThreadClaims {
    active: Mutex<HashSet<String>>,
}

/// Held while a turn runs; dropping it frees the thread.
#[derive(Debug)]
pub struct Claim {
    claims: Arc<ThreadClaims>,
    thread: String,
}

impl ThreadClaims {
    /// Claims `thread`, or `None` while another turn holds it.
    pub fn claim(self: &Arc<Self>, thread: &str) -> Option<Claim> {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active.insert(thread.to_string()).then(|| Claim {
            claims: self.clone(),
            thread: thread.to_string(),
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut active = self.claims.active.lock().unwrap_or_else(|e| e.into_inner());
        active.remove(&self.thread);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_claim_per_thread() {
        let c = Arc::new(ThreadClaims::default());
        let a = c.claim("t1").unwrap();
        assert!(c.claim("t1").is_none());
        assert!(c.claim("t2").is_some());
        drop(a);
        assert!(c.claim("t1").is_some());
    }
}
