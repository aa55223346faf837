//! Payload modes (spec "Payload Modes") and their negotiation: the
//! initiator's preferences, highest first, against what the responder
//! supports and what is implemented; Text when nothing else is common; the
//! fallback chain of the common implemented modes below the chosen one.

use serde::{Deserialize, Serialize};

/// A payload mode, by its wire value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadMode {
    /// Mode 0, required of every delegate.
    Text,
    /// Mode 1, recommended.
    SemanticFrame,
    /// Mode 2, optional.
    EmbeddingHints,
    /// Mode 3, optional.
    SemanticGraph,
    /// Mode 4, future.
    LatentCapsules,
    /// Mode 5, future.
    CacheSlices,
}

impl PayloadMode {
    /// The mode's number (0 for Text).
    pub fn number(self) -> u8 {
        match self {
            PayloadMode::Text => 0,
            PayloadMode::SemanticFrame => 1,
            PayloadMode::EmbeddingHints => 2,
            PayloadMode::SemanticGraph => 3,
            PayloadMode::LatentCapsules => 4,
            PayloadMode::CacheSlices => 5,
        }
    }

    /// Whether this implementation (and the reference's) can carry it.
    pub fn is_implemented(self) -> bool {
        matches!(self, PayloadMode::Text | PayloadMode::SemanticFrame)
    }

    /// As the wire writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            PayloadMode::Text => "text",
            PayloadMode::SemanticFrame => "semantic_frame",
            PayloadMode::EmbeddingHints => "embedding_hints",
            PayloadMode::SemanticGraph => "semantic_graph",
            PayloadMode::LatentCapsules => "latent_capsules",
            PayloadMode::CacheSlices => "cache_slices",
        }
    }
}

/// The outcome of a negotiation: the session's mode and where it falls
/// back to, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Negotiated {
    /// The mode the session starts in.
    pub mode: PayloadMode,
    /// The modes to fall back to, highest first.
    pub fallback_chain: Vec<PayloadMode>,
}

/// Negotiates as the spec's algorithm: the first of `initiator` (highest
/// preference first) that is implemented and in `responder`; else Text;
/// the fallback chain is the other common implemented modes of
/// `initiator`'s list with lower numbers, in its order.
pub fn negotiate(initiator: &[PayloadMode], responder: &[PayloadMode]) -> Negotiated {
    let mode = initiator
        .iter()
        .copied()
        .find(|m| m.is_implemented() && responder.contains(m))
        .unwrap_or(PayloadMode::Text);
    let mut fallback_chain: Vec<PayloadMode> = Vec::new();
    for m in initiator.iter().copied() {
        if m.is_implemented()
            && m != mode
            && responder.contains(&m)
            && m.number() < mode.number()
            && !fallback_chain.contains(&m)
        {
            fallback_chain.push(m);
        }
    }
    Negotiated {
        mode,
        fallback_chain,
    }
}

impl Negotiated {
    /// Falls back after the current mode failed mid-session: the next mode
    /// of the chain, else Text (every delegate supports it), else none.
    pub fn fall_back(&mut self) -> Option<PayloadMode> {
        let next = if self.fallback_chain.is_empty() {
            (self.mode != PayloadMode::Text).then_some(PayloadMode::Text)?
        } else {
            self.fallback_chain.remove(0)
        };
        self.mode = next;
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use PayloadMode::*;

    /// The spec's sequence diagram: semantic_graph skipped (not
    /// implemented), semantic_frame chosen, fallback [text]; a failure
    /// mid-session falls back to text, then nothing.
    #[test]
    fn the_spec_example() {
        let mut n = negotiate(
            &[SemanticGraph, SemanticFrame, Text],
            &[SemanticFrame, Text],
        );
        assert_eq!(
            n,
            Negotiated {
                mode: SemanticFrame,
                fallback_chain: vec![Text]
            }
        );
        assert_eq!(n.fall_back(), Some(Text));
        assert_eq!(n.mode, Text);
        assert_eq!(n.fall_back(), None);
        assert_eq!(negotiate(&[], &[]).mode, Text);
        assert_eq!(negotiate(&[SemanticFrame], &[Text]).mode, Text);
        // Text is the last resort even when the chain does not list it.
        let mut n = negotiate(&[SemanticFrame], &[SemanticFrame]);
        assert_eq!(n.fallback_chain, vec![]);
        assert_eq!(n.fall_back(), Some(Text));
    }

    fn modes() -> impl Strategy<Value = Vec<PayloadMode>> {
        proptest::collection::vec(
            prop_oneof![
                Just(Text),
                Just(SemanticFrame),
                Just(EmbeddingHints),
                Just(SemanticGraph),
                Just(LatentCapsules),
                Just(CacheSlices)
            ],
            0..6,
        )
    }

    proptest! {
        /// The chosen mode is implemented and common (or Text); the chain
        /// only descends; falling back always ends at Text and stops.
        #[test]
        fn negotiation_invariants(i in modes(), r in modes()) {
            let mut n = negotiate(&i, &r);
            prop_assert!(n.mode.is_implemented());
            prop_assert!(n.mode == Text || (i.contains(&n.mode) && r.contains(&n.mode)));
            let mut last = n.mode.number();
            let mut steps = 0;
            while let Some(m) = n.fall_back() {
                prop_assert!(m.number() < last);
                last = m.number();
                steps += 1;
                prop_assert!(steps <= 6);
            }
            prop_assert_eq!(n.mode, Text);
        }
    }
}
