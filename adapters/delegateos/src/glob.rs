//! Resource globs (§10.2) and exact pattern containment.
//!
//! A resource is split on `/` into segments. In a pattern, a segment `*`
//! matches any one segment, `**` any number of segments (zero included), and
//! any other segment matches itself exactly. A whole pattern of `*` (or `**`)
//! matches every resource. Wildcards never match the dot segments `.` and
//! `..`, so `/project/**` does not grant `/project/../etc/passwd`.
//!
//! Containment (`child ⊆ parent`) is decided exactly, not by prefix tricks:
//! both patterns are automata over segments, and since every segment that is
//! not a literal of either pattern behaves alike, checking over the finite
//! alphabet "their literals, `.`, `..` and one fresh segment" is both sound
//! and complete. The check returns a witness resource when it fails.

use std::collections::{HashMap, VecDeque};
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest pattern text accepted.
pub const MAX_PATTERN_BYTES: usize = 1024;
/// Most segments in a pattern (the automaton's states fit a `u128`).
pub const MAX_PATTERN_SEGMENTS: usize = 64;
/// Subset-construction states explored before giving up (answering "not a subset").
const MAX_SEARCH_STATES: usize = 1 << 16;

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("resource pattern is {0} bytes, more than {MAX_PATTERN_BYTES}")]
    /// The pattern is longer than allowed (its length).
    TooLong(usize),
    #[error("resource pattern has {0} segments, more than {MAX_PATTERN_SEGMENTS}")]
    /// The pattern has more segments than allowed (how many).
    TooManySegments(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Star,
    GlobStar,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    /// A lone `*` or `**`: every resource.
    Everything,
    Segments(Vec<Segment>),
}

/// A parsed resource glob that keeps its text.
#[derive(Clone, PartialEq, Eq)]
pub struct ResourcePattern {
    text: String,
    shape: Shape,
}

/// The outcome of a containment check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Containment {
    /// Every resource the child matches, the parent matches.
    Subset,
    /// This resource is matched by the child and not by the parent.
    /// The pattern matches something the other does not.
    NotSubset {
        /// A resource one matches and the other does not.
        witness: String,
    },
    /// The patterns were too intricate to decide within the search bound;
    /// treated as "not a subset" (fail closed).
    Undecided,
}

fn is_dot(segment: &str) -> bool {
    segment == "." || segment == ".."
}

impl ResourcePattern {
    /// Parses a pattern.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        if text.len() > MAX_PATTERN_BYTES {
            return Err(PatternError::TooLong(text.len()));
        }
        let shape = if text == "*" || text == "**" {
            Shape::Everything
        } else {
            let segments: Vec<Segment> = text
                .split('/')
                .map(|s| match s {
                    "*" => Segment::Star,
                    "**" => Segment::GlobStar,
                    literal => Segment::Literal(literal.to_owned()),
                })
                .collect();
            if segments.len() > MAX_PATTERN_SEGMENTS {
                return Err(PatternError::TooManySegments(segments.len()));
            }
            Shape::Segments(segments)
        };
        Ok(Self {
            text: text.to_owned(),
            shape,
        })
    }

    /// The pattern text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether this pattern matches the concrete `resource`.
    pub fn matches(&self, resource: &str) -> bool {
        let automaton = Automaton(&self.shape);
        let mut states = automaton.start();
        for segment in resource.split('/') {
            states = automaton.step(states, segment);
            if states == 0 {
                return false;
            }
        }
        automaton.accepts(states)
    }

    /// Whether every resource `self` matches is matched by `parent`.
    pub fn is_subset_of(&self, parent: &ResourcePattern) -> bool {
        self.containment(parent) == Containment::Subset
    }

    /// Decides `self ⊆ parent`, with a witness when it does not hold.
    pub fn containment(&self, parent: &ResourcePattern) -> Containment {
        if parent.shape == Shape::Everything {
            return Containment::Subset;
        }
        let alphabet = Alphabet::of(&[&self.shape, &parent.shape]);
        let child = Automaton(&self.shape);
        let parent_a = Automaton(&parent.shape);
        let start = (child.start(), parent_a.start());
        // Breadth-first over (child states, parent states) pairs reached by
        // words of one or more segments; remember how each was reached.
        let mut came_from: Trail = HashMap::new();
        let mut queue = VecDeque::new();
        for (sym, segment) in alphabet.symbols.iter().enumerate() {
            let next = (
                child.step(start.0, segment),
                parent_a.step(start.1, segment),
            );
            if next.0 != 0 && !came_from.contains_key(&next) {
                came_from.insert(next, (start, sym));
                queue.push_back(next);
            }
        }
        while let Some(pair) = queue.pop_front() {
            if child.accepts(pair.0) && !parent_a.accepts(pair.1) {
                return Containment::NotSubset {
                    witness: alphabet.word(&came_from, pair, start),
                };
            }
            for (sym, segment) in alphabet.symbols.iter().enumerate() {
                let next = (child.step(pair.0, segment), parent_a.step(pair.1, segment));
                if next.0 != 0 && !came_from.contains_key(&next) {
                    if came_from.len() >= MAX_SEARCH_STATES {
                        return Containment::Undecided;
                    }
                    came_from.insert(next, (pair, sym));
                    queue.push_back(next);
                }
            }
        }
        Containment::Subset
    }
}

/// (child states, parent states) of the product automaton.
type StatePair = (u128, u128);
/// How each reached pair was first reached: the pair before it and the symbol.
type Trail = HashMap<StatePair, (StatePair, usize)>;

/// The segment automaton of a pattern, with state sets as bit masks:
/// bit `k` means "the first `k` pattern segments are matched". For
/// `Everything`, bit 0 means "alive".
struct Automaton<'a>(&'a Shape);

impl Automaton<'_> {
    fn closure(segments: &[Segment], mut states: u128) -> u128 {
        for (k, segment) in segments.iter().enumerate() {
            if states & (1 << k) != 0 && *segment == Segment::GlobStar {
                states |= 1 << (k + 1);
            }
        }
        states
    }

    fn start(&self) -> u128 {
        match self.0 {
            Shape::Everything => 1,
            Shape::Segments(s) => Self::closure(s, 1),
        }
    }

    fn step(&self, states: u128, segment: &str) -> u128 {
        let segments = match self.0 {
            Shape::Everything => return states,
            Shape::Segments(s) => s,
        };
        let mut next = 0u128;
        for (k, pattern) in segments.iter().enumerate() {
            if states & (1 << k) == 0 {
                continue;
            }
            match pattern {
                Segment::Literal(l) if l == segment => next |= 1 << (k + 1),
                Segment::Star if !is_dot(segment) => next |= 1 << (k + 1),
                Segment::GlobStar if !is_dot(segment) => next |= 1 << k,
                _ => {}
            }
        }
        Self::closure(segments, next)
    }

    fn accepts(&self, states: u128) -> bool {
        match self.0 {
            Shape::Everything => states != 0,
            Shape::Segments(s) => states & (1 << s.len()) != 0,
        }
    }
}

/// The finite alphabet that stands for all segments: every literal of the
/// patterns, both dot segments, and one segment that is none of those.
struct Alphabet {
    symbols: Vec<String>,
}

impl Alphabet {
    fn of(shapes: &[&Shape]) -> Self {
        let mut symbols: Vec<String> = vec![".".into(), "..".into()];
        for shape in shapes {
            if let Shape::Segments(segments) = shape {
                for s in segments {
                    if let Segment::Literal(l) = s {
                        if !symbols.contains(l) {
                            symbols.push(l.clone());
                        }
                    }
                }
            }
        }
        let mut fresh = String::from("x");
        while symbols.contains(&fresh) {
            fresh.push('x');
        }
        symbols.push(fresh);
        Self { symbols }
    }

    /// The word that leads from `start` to `at`.
    fn word(&self, came_from: &Trail, mut at: StatePair, start: StatePair) -> String {
        let mut segments = Vec::new();
        while let Some((prev, sym)) = came_from.get(&at) {
            segments.push(self.symbols[*sym].as_str());
            if *prev == start {
                break;
            }
            at = *prev;
        }
        segments.reverse();
        segments.join("/")
    }
}

impl fmt::Debug for ResourcePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ResourcePattern({:?})", self.text)
    }
}
impl fmt::Display for ResourcePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
impl Serialize for ResourcePattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}
impl<'de> Deserialize<'de> for ResourcePattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        ResourcePattern::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ResourcePattern {
        ResourcePattern::parse(s).unwrap()
    }

    #[test]
    fn spec_examples() {
        assert!(p("/project/*").matches("/project/foo"));
        assert!(!p("/project/*").matches("/project/foo/bar"));
        assert!(p("/project/**").matches("/project/foo/bar/baz"));
        assert!(p("/project/**").matches("/project"));
        assert!(p("*").matches("anything/at/all"));
        assert!(p("*").matches("../x"));
        assert!(p("/a/b").matches("/a/b"));
        assert!(!p("/a/b").matches("/a/b/"));
    }

    #[test]
    fn dot_segments_never_match_wildcards() {
        assert!(!p("/project/**").matches("/project/../etc/passwd"));
        assert!(!p("/project/*/x").matches("/project/../x"));
        assert!(!p("/project/*").matches("/project/."));
        assert!(p("/project/../x").matches("/project/../x"));
    }

    #[test]
    fn containment_cases() {
        let subset = |c: &str, parent: &str| p(c).is_subset_of(&p(parent));
        assert!(subset("/project/a", "/project/*"));
        assert!(subset("/project/*", "/project/**"));
        assert!(subset("/project/**", "/project/**"));
        assert!(subset("/project/a/**", "/project/**"));
        assert!(subset("/a/*/c", "/a/**"));
        assert!(subset("/a/**/c", "/a/**"));
        assert!(subset("/a/*/**", "/a/**"));
        assert!(subset("/a/**/**", "/a/**"));
        assert!(subset("/a/*/*/**", "/a/*/**"));
        assert!(subset("anything", "*"));
        assert!(subset("**", "*"));
        // The reference's prefix bug: no segment boundary, no subset.
        assert!(!subset("/projectSECRET/**", "/project/**"));
        assert!(!subset("/project/**", "/project/*"));
        assert!(!subset("/project/*", "/project/a"));
        assert!(!subset("*", "/project/**"));
        assert!(!subset("/a/**", "/a/*/**"));
        assert!(!subset("/a/../b", "/a/**"));
        assert!(subset("/a/../b", "/a/../b"));
        assert!(subset("/x/**/y/**", "/x/**"));
        assert!(!subset("/x/**", "/x/**/y/**"));
    }

    #[test]
    fn witnesses_are_real() {
        for (c, parent) in [
            ("/project/**", "/project/*"),
            ("/projectSECRET/**", "/project/**"),
            ("*", "/a/**"),
            ("/a/**", "/a/*/**"),
            ("/x/**", "/x/**/y/**"),
        ] {
            match p(c).containment(&p(parent)) {
                Containment::NotSubset { witness } => {
                    assert!(p(c).matches(&witness), "{c} should match {witness}");
                    assert!(
                        !p(parent).matches(&witness),
                        "{parent} should not match {witness}"
                    );
                }
                other => panic!("{c} ⊆ {parent}: {other:?}"),
            }
        }
    }

    #[test]
    fn limits() {
        assert!(ResourcePattern::parse(&"a/".repeat(64)).is_err());
        assert!(ResourcePattern::parse(&"a".repeat(2000)).is_err());
        let many = "/**/a".repeat(12);
        let many = p(&many);
        // Deep GlobStar alternation stays decidable or fails closed, never hangs.
        let _ = many.containment(&p(&"/**/a/*".repeat(10)));
    }
}
