//! A lexicon constraint for CTC beam search: the words a transcript may be made of.
//!
//! The words are token sequences stored as a trie. A decoding state is a trie node: the part
//! of the current word emitted so far (node 0: between words).
//! - With a word separator (the space of a character vocabulary), a transcript is lexicon
//!   words joined by single separators: a token is allowed when it continues a word of the
//!   lexicon, the separator only right after a whole word.
//! - Without one (gloss vocabularies, where every token is a word), every entry must be a
//!   single token and the lexicon is the set of tokens the decoder may emit.

use std::collections::BTreeMap;

/// A decoding state: a node of the lexicon trie (`0`: between words).
pub type LexiconState = u32;

/// Words as token sequences, for [`crate::decode::beam`].
#[derive(Debug, Clone, PartialEq)]
pub struct Lexicon {
    /// Children of every node, sorted by token.
    children: Vec<Vec<(usize, LexiconState)>>,
    /// Whether a node ends a word.
    terminal: Vec<bool>,
    separator: Option<usize>,
    words: usize,
}

impl Lexicon {
    /// A lexicon of `words` (token sequences; duplicates count once). Refused: no words, an
    /// empty word, a word holding `blank` or the separator, and, without a separator, a
    /// word of more than one token. The message names the word's position in `words`.
    pub fn new(words: &[Vec<usize>], separator: Option<usize>, blank: usize) -> Result<Self, String> {
        if words.is_empty() {
            return Err("the lexicon holds no words".into());
        }
        let mut nodes: Vec<BTreeMap<usize, LexiconState>> = vec![BTreeMap::new()];
        let mut terminal = vec![false];
        let mut distinct = 0;
        for (i, word) in words.iter().enumerate() {
            if word.is_empty() {
                return Err(format!("word {} is empty", i + 1));
            }
            if let Some(&t) = word.iter().find(|&&t| t == blank || Some(t) == separator) {
                let what = if t == blank { "the CTC blank" } else { "the word separator" };
                return Err(format!(
                    "word {} holds {what} (class {t}); a word is a run of tokens between separators",
                    i + 1
                ));
            }
            if separator.is_none() && word.len() > 1 {
                return Err(format!(
                    "word {} has {} tokens; without a word separator in the vocabulary (glosses) every lexicon entry is one token",
                    i + 1,
                    word.len()
                ));
            }
            let mut node = 0usize;
            for &t in word {
                let next = nodes.len() as LexiconState;
                node = *nodes[node].entry(t).or_insert(next) as usize;
                if node == nodes.len() {
                    nodes.push(BTreeMap::new());
                    terminal.push(false);
                }
            }
            distinct += usize::from(!terminal[node]);
            terminal[node] = true;
        }
        let children = nodes.into_iter().map(|m| m.into_iter().collect()).collect();
        Ok(Self { children, terminal, separator, words: distinct })
    }

    /// Distinct words.
    pub fn len(&self) -> usize {
        self.words
    }

    /// Whether there are no words (never true for a built lexicon).
    pub fn is_empty(&self) -> bool {
        self.words == 0
    }

    /// The state before any token.
    pub fn start(&self) -> LexiconState {
        0
    }

    /// The state after `token` is emitted in `state`, or `None` when no transcript of
    /// lexicon words continues that way.
    pub fn step(&self, state: LexiconState, token: usize) -> Option<LexiconState> {
        let s = state as usize;
        if Some(token) == self.separator {
            return (s != 0 && self.terminal[s]).then_some(0);
        }
        let child = |node: usize| {
            let c = &self.children[node];
            c.binary_search_by_key(&token, |&(t, _)| t).ok().map(|i| c[i].1)
        };
        child(s).or_else(|| (self.separator.is_none() && self.terminal[s]).then(|| child(0)).flatten())
    }

    /// Whether a non-empty transcript may end in `state`: right after a whole word (not after
    /// a separator, not inside a word).
    pub fn complete(&self, state: LexiconState) -> bool {
        self.terminal[state as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(lex: &Lexicon, tokens: &[usize]) -> Option<LexiconState> {
        tokens.iter().try_fold(lex.start(), |s, &t| lex.step(s, t))
    }

    #[test]
    fn words_joined_by_the_separator_and_nothing_else() {
        // blank 0, space 1, a 2, b 3, c 4: words "ab", "abc", "c".
        let lex = Lexicon::new(&[vec![2, 3], vec![2, 3, 4], vec![4], vec![2, 3]], Some(1), 0).unwrap();
        assert_eq!(lex.len(), 3);
        for ok in [&[2, 3][..], &[2, 3, 4], &[4, 1, 2, 3], &[2, 3, 1, 4, 1, 2, 3, 4]] {
            assert!(walk(&lex, ok).is_some_and(|s| lex.complete(s)), "{ok:?}");
        }
        // A trailing separator is reachable (the next word may follow) but ends no transcript.
        assert!(walk(&lex, &[4, 1]).is_some_and(|s| !lex.complete(s)));
        // A word's prefix is reachable but not complete; a non-word, a leading, doubled or
        // mid-word separator is not reachable.
        assert!(walk(&lex, &[2]).is_some_and(|s| !lex.complete(s)));
        for bad in [&[3][..], &[1, 4], &[4, 1, 1], &[2, 1], &[4, 4], &[2, 3, 4, 4]] {
            assert_eq!(walk(&lex, bad), None, "{bad:?}");
        }
    }

    #[test]
    fn without_a_separator_the_lexicon_is_the_allowed_tokens() {
        let lex = Lexicon::new(&[vec![2], vec![5]], None, 0).unwrap();
        assert!(walk(&lex, &[2, 5, 5, 2]).is_some_and(|s| lex.complete(s)));
        assert_eq!(walk(&lex, &[2, 3]), None);
        let err = Lexicon::new(&[vec![2], vec![3, 4]], None, 0).unwrap_err();
        assert!(err.contains("word 2 has 2 tokens"), "{err}");
    }

    #[test]
    fn bad_words_are_refused_by_position() {
        assert!(Lexicon::new(&[], Some(1), 0).unwrap_err().contains("no words"));
        assert!(Lexicon::new(&[vec![2], vec![]], Some(1), 0).unwrap_err().contains("word 2 is empty"));
        let err = Lexicon::new(&[vec![2, 1, 3]], Some(1), 0).unwrap_err();
        assert!(err.contains("word 1 holds the word separator"), "{err}");
        assert!(Lexicon::new(&[vec![0]], Some(1), 0).unwrap_err().contains("the CTC blank"));
    }
}
