//! Ids that say what they hold. Each is a `String` underneath and `#[serde(transparent)]`, so
//! the stored format (event payloads, the digest's JSON, projection snapshots) is exactly the
//! string it always was; in code a task's id can no longer be passed where a session's is
//! meant. Each reads as a `&str` (`Deref`, `Borrow<str>`: a map keyed by ids is looked up by
//! `&str`), compares with strings, and is made from one with `into()`.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<String> for $name {
            fn borrow(&self) -> &String {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.to_owned())
            }
        }

        impl From<&String> for $name {
            fn from(s: &String) -> Self {
                $name(s.clone())
            }
        }

        impl From<&$name> for $name {
            fn from(s: &$name) -> Self {
                s.clone()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl From<&$name> for String {
            fn from(id: &$name) -> String {
                id.0.clone()
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
}

id!(
    /// A task's id (`Task.id`, every `task_id`).
    TaskId
);

id!(
    /// An agent session's id (`Session.id`, every `session_id`, the envelope's
    /// `agent_session_id`); not the vendor's own session id, which stays text.
    SessionId
);

id!(
    /// A project's id (`Project.id`, every `project_id`).
    ProjectId
);

id!(
    /// A review's id (`Review.id`, every `review_id`).
    ReviewId
);

id!(
    /// A user's login (`User.login`, every `login`, an owner, a creator, who answered); not an
    /// event's `actor`, which is a login or `byre` itself.
    Login
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_stored_as_its_string_and_reads_as_one() {
        let id = TaskId::from("t-1");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"t-1\"");
        assert_eq!(serde_json::from_str::<TaskId>("\"t-1\"").unwrap(), id);
        let map = std::collections::BTreeMap::from([(id.clone(), 1)]);
        assert_eq!(map.get("t-1"), Some(&1));
        assert_eq!(id, "t-1");
        assert_eq!("t-1", id);
        assert_eq!(id.len(), 3);
        assert_eq!(format!("{id}"), "t-1");
    }
}
