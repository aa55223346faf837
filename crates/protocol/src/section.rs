//! A module's config section, read out of the whole file's TOML text: the
//! module deserializes only its own table, and toml's errors keep the line
//! and column they point at.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, IgnoredAny, MapAccess, Visitor};
use serde::Deserializer as _;

/// Why a module's section was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SectionError {
    /// The section is not what its type reads (a wrong type, an unknown
    /// key): toml's message, naming the key and the line.
    #[error("{0}")]
    Parse(String),
    /// `key` (the full key: `toy.issuers[0].tenant`) is refused for `problem`.
    #[error("`{key}`: {problem}")]
    Invalid { key: String, problem: String },
}

impl SectionError {
    /// `key` is refused for `problem`.
    pub fn invalid(key: impl Into<String>, problem: impl Into<String>) -> Self {
        Self::Invalid {
            key: key.into(),
            problem: problem.into(),
        }
    }
}

impl From<(String, String)> for SectionError {
    /// A validator's `(key, problem)`.
    fn from((key, problem): (String, String)) -> Self {
        Self::Invalid { key, problem }
    }
}

/// A config file as a module reads its section from it.
#[derive(Debug, Clone, Copy)]
pub struct Document<'a> {
    /// Its TOML text.
    pub text: &'a str,
    /// Its directory: relative paths in it are relative to this.
    pub dir: &'a std::path::Path,
}

/// The top-level table `name` of the TOML `document`, read as `T`;
/// `None` when the document has no such table. Every other table is
/// skipped unread.
pub fn section<T: DeserializeOwned>(document: &str, name: &str) -> Result<Option<T>, SectionError> {
    toml::Deserializer::new(document)
        .deserialize_map(Pick {
            name,
            wanted: PhantomData,
        })
        .map_err(|e: toml::de::Error| SectionError::Parse(e.to_string().trim_end().to_owned()))
}

/// Deserializes the value of one key of a map, skipping the others.
struct Pick<'n, T> {
    name: &'n str,
    wanted: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> Visitor<'de> for Pick<'_, T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == self.name {
                found = Some(map.next_value::<T>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Toy {
        budget: u64,
    }

    #[test]
    fn only_its_own_section_is_read_and_its_errors_name_the_key() {
        let doc = "data_dir = 1\n[server]\nhttp = \"x\"\n[toy]\nbudget = 5\n";
        assert_eq!(section::<Toy>(doc, "toy"), Ok(Some(Toy { budget: 5 })));
        assert_eq!(section::<Toy>(doc, "other"), Ok(None));
        let bad = section::<Toy>("[toy]\nbudgt = 5\n", "toy").unwrap_err();
        assert!(bad.to_string().contains("budgt"), "{bad}");
        let negative = section::<Toy>("[toy]\nbudget = -1\n", "toy").unwrap_err();
        assert!(negative.to_string().contains("budget = -1"), "{negative}");
        assert!(section::<Toy>("[toy\n", "toy").is_err());
    }
}
