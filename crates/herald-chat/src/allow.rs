//! Who may talk to a bot, by user id, in Hermes's order (`gateway/authz_mixin.py`
//! `_is_user_authorized`): the platform's allow-all, its allow-list and the gateway's
//! (`*`: everyone), and the gateway's allow-all only when no list is set. The same for
//! every platform; a platform adds its own lists (Telegram's group-only users).

use std::collections::BTreeSet;

/// One platform's user lists.
#[derive(Debug, Clone, Default)]
pub struct Users {
    /// `<PLATFORM>_ALLOWED_USERS` (`*`: everyone).
    pub allowed: BTreeSet<String>,
    /// `<PLATFORM>_ALLOW_ALL_USERS`.
    pub allow_all: bool,
    /// `GATEWAY_ALLOWED_USERS`.
    pub gateway_allowed: BTreeSet<String>,
    /// `GATEWAY_ALLOW_ALL_USERS`: everyone, when no list is set.
    pub gateway_allow_all: bool,
}

impl Users {
    /// Whether `id` may talk to the bot; `more`: the platform's other lists that
    /// apply here (listed there allows, and a set one counts as a list);
    /// `other_lists`: a list that does not apply here is set (so the gateway's
    /// allow-all does not either).
    pub fn allow(&self, id: &str, more: &[&BTreeSet<String>], other_lists: bool) -> bool {
        if self.allow_all {
            return true;
        }
        let listed = |set: &BTreeSet<String>| set.contains("*") || set.contains(id);
        let lists = [&self.allowed, &self.gateway_allowed];
        if lists.iter().chain(more).any(|s| listed(s)) {
            return true;
        }
        let any_list = lists.iter().chain(more).any(|s| !s.is_empty());
        !any_list && !other_lists && self.gateway_allow_all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_allows_its_users_and_the_gateway_wide_switch_only_without_lists() {
        let set = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
        let mut u = Users {
            allowed: set(&["U1"]),
            gateway_allow_all: true,
            ..Users::default()
        };
        assert!(u.allow("U1", &[], false));
        assert!(!u.allow("U2", &[], false));
        assert!(u.allow("U2", &[&set(&["U2"])], false));
        u.allowed.clear();
        assert!(u.allow("U2", &[], false));
        assert!(!u.allow("U2", &[&set(&["U3"])], false));
        assert!(!u.allow("U2", &[], true));
        u.gateway_allowed = set(&["*"]);
        assert!(u.allow("U9", &[], false));
        let all = Users {
            allow_all: true,
            ..Users::default()
        };
        assert!(all.allow("anyone", &[], false));
    }
}
