//! Token vocabularies of continuous recognition (CTC): characters of fingerspelled phrases or
//! glosses of signed sentences, mapped to model classes with class 0 the CTC blank.
//!
//! - characters: the ASL Fingerspelling `character_to_prediction_index.json` (`{"a": 0, …}`,
//!   indices exactly `0..n`); a phrase is split into characters;
//! - glosses: a text file with one gloss per line (blank lines and `#` comments skipped); a
//!   sentence is split at whitespace.
//!
//! Token `i` of the file is class `i + 1`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};

/// The CTC blank's class.
pub const BLANK: usize = 0;

/// How a label text is split into tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Every character (Unicode scalar) is a token.
    Character,
    /// Every whitespace-separated word is a token.
    Gloss,
}

/// A token vocabulary.
#[derive(Debug, Clone, PartialEq)]
pub struct Vocabulary {
    /// How texts are split.
    pub unit: Unit,
    /// Tokens; token `i` is class `i + 1`.
    pub tokens: Vec<String>,
    /// Where it was read from (for messages).
    pub source: PathBuf,
    lookup: HashMap<String, usize>,
}

impl Vocabulary {
    /// A vocabulary of `tokens` (distinct) split by `unit`.
    pub fn new(unit: Unit, tokens: Vec<String>, source: PathBuf) -> Result<Self> {
        let mut lookup = HashMap::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            if t.is_empty() || (unit == Unit::Character && t.chars().count() != 1) {
                return Err(DataError::invalid(&source, format!("token {i} `{t}` is not a single {unit:?}")));
            }
            if let Some(j) = lookup.insert(t.clone(), i + 1) {
                return Err(DataError::invalid(
                    &source,
                    format!("token `{t}` appears twice (entries {} and {i})", j - 1),
                ));
            }
        }
        Ok(Self { unit, tokens, source, lookup })
    }

    /// Read a character map `{"a": 0, …}` (indices exactly `0..n`).
    pub fn read_character_map(path: &Path) -> Result<Self> {
        let labels = crate::index::read_label_map(path)?;
        Self::new(Unit::Character, labels, path.to_path_buf())
    }

    /// Read a gloss list: one gloss per line, blank lines and `#` comments skipped.
    pub fn read_gloss_list(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| DataError::io(path, e))?;
        let tokens: Vec<String> =
            text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect();
        if let Some(bad) = tokens.iter().find(|t| t.split_whitespace().count() != 1) {
            return Err(DataError::invalid(path, format!("gloss `{bad}` contains whitespace; one gloss per line")));
        }
        Self::new(Unit::Gloss, tokens, path.to_path_buf())
    }

    /// Classes including the blank.
    pub fn classes(&self) -> usize {
        self.tokens.len() + 1
    }

    /// The classes of `text`; an unknown token is an error naming it and where it is.
    pub fn encode(&self, text: &str) -> std::result::Result<Vec<usize>, String> {
        let find = |t: &str, at: usize| {
            self.lookup.get(t).copied().ok_or_else(|| {
                format!("`{t}` (position {at} of \"{text}\") is not in the vocabulary {}", self.source.display())
            })
        };
        match self.unit {
            Unit::Character => text.chars().enumerate().map(|(i, c)| find(&c.to_string(), i)).collect(),
            Unit::Gloss => text.split_whitespace().enumerate().map(|(i, w)| find(w, i)).collect(),
        }
    }

    /// The text of `classes` (the blank and unknown classes are skipped).
    pub fn decode(&self, classes: &[usize]) -> String {
        let tokens = classes.iter().filter_map(|&c| c.checked_sub(1).and_then(|i| self.tokens.get(i)));
        join(self.unit, tokens.map(String::as_str))
    }
}

/// The words of a lexicon: the whitespace-separated words of a text file (one per line or
/// running text; lines starting with `#` skipped), each once, in the order first seen.
#[derive(Debug, Clone, PartialEq)]
pub struct WordList {
    /// Where the words come from (for messages).
    pub source: PathBuf,
    /// The distinct words.
    pub words: Vec<String>,
    /// The line of each word in `source` (0 when the words did not come from a file).
    lines: Vec<usize>,
}

impl WordList {
    /// Words from memory (a model card's), `source` naming where they are kept.
    pub fn new(words: Vec<String>, source: PathBuf) -> Self {
        let lines = vec![0; words.len()];
        Self { source, words, lines }
    }

    /// Read a word list; a file without words is an error.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| DataError::io(path, e))?;
        let mut seen = std::collections::HashSet::new();
        let (mut words, mut lines) = (Vec::new(), Vec::new());
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with('#') {
                continue;
            }
            for w in line.split_whitespace() {
                if seen.insert(w) {
                    words.push(w.to_string());
                    lines.push(n + 1);
                }
            }
        }
        if words.is_empty() {
            return Err(DataError::invalid(path, "holds no words (expected whitespace-separated words)"));
        }
        Ok(Self { source: path.to_path_buf(), words, lines })
    }

    /// Every word as classes of `vocabulary`; a word with a token outside it is an error naming
    /// the word and its line.
    pub fn classes(&self, vocabulary: &Vocabulary) -> std::result::Result<Vec<Vec<usize>>, String> {
        let at = |i: usize| match self.lines[i] {
            0 => format!("{} (word {})", self.source.display(), i + 1),
            n => format!("{}:{n}", self.source.display()),
        };
        self.words
            .iter()
            .enumerate()
            .map(|(i, w)| vocabulary.encode(w).map_err(|e| format!("{}: word `{w}`: {e}", at(i))))
            .collect()
    }
}

/// The text of a token sequence: characters joined as they are, glosses with spaces.
pub fn join<'a>(unit: Unit, tokens: impl Iterator<Item = &'a str>) -> String {
    match unit {
        Unit::Character => tokens.collect(),
        Unit::Gloss => tokens.collect::<Vec<_>>().join(" "),
    }
}

/// The class of the word separator among class `labels` (blank first, then the tokens): the
/// space character of a character vocabulary; `None` for glosses, where every token is a word.
pub fn word_separator(unit: Unit, labels: &[String]) -> Option<usize> {
    match unit {
        Unit::Character => labels.iter().position(|l| l == " "),
        Unit::Gloss => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_lists_read_distinct_words_and_name_the_line_of_a_misspelt_one() {
        let dir = tempfile::tempdir().unwrap();
        let map = dir.path().join("character_to_prediction_index.json");
        std::fs::write(&map, r#"{" ": 0, "a": 1, "b": 2}"#).unwrap();
        let v = Vocabulary::read_character_map(&map).unwrap();
        let words = dir.path().join("words.txt");
        std::fs::write(&words, "# comment\nab ba\n\n  ab aab\n").unwrap();
        let list = WordList::read(&words).unwrap();
        assert_eq!(list.words, ["ab", "ba", "aab"]);
        assert_eq!(list.classes(&v).unwrap(), [vec![2, 3], vec![3, 2], vec![2, 2, 3]]);
        std::fs::write(&words, "ab\nba abc\n").unwrap();
        let err = WordList::read(&words).unwrap().classes(&v).unwrap_err();
        assert!(err.contains("words.txt:2: word `abc`") && err.contains("`c` (position 2"), "{err}");
        std::fs::write(&words, "# nothing\n\n").unwrap();
        assert!(WordList::read(&words).unwrap_err().to_string().contains("holds no words"));
        assert!(WordList::read(&dir.path().join("missing.txt")).is_err());
    }

    #[test]
    fn characters_and_glosses_round_trip_and_unknowns_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let map = dir.path().join("character_to_prediction_index.json");
        std::fs::write(&map, r#"{" ": 0, "a": 1, "b": 2, "3": 3}"#).unwrap();
        let v = Vocabulary::read_character_map(&map).unwrap();
        assert_eq!(v.classes(), 5);
        assert_eq!(v.encode("ab 3").unwrap(), vec![2, 3, 1, 4]);
        assert_eq!(v.decode(&[2, 3, 0, 1, 4, 99]), "ab 3");
        let labels: Vec<String> = std::iter::once("<blank>".to_string()).chain(v.tokens.iter().cloned()).collect();
        assert_eq!(word_separator(v.unit, &labels), Some(1));
        let err = v.encode("abc").unwrap_err();
        assert!(
            err.contains("`c` (position 2 of \"abc\")") && err.contains("character_to_prediction_index.json"),
            "{err}"
        );

        let list = dir.path().join("glosses.txt");
        std::fs::write(&list, "# vocabulary\nHELLO\n\nTHANK-YOU\nME\n").unwrap();
        let g = Vocabulary::read_gloss_list(&list).unwrap();
        assert_eq!(g.encode("ME  HELLO").unwrap(), vec![3, 1]);
        assert_eq!(g.decode(&[1, 2]), "HELLO THANK-YOU");
        assert!(g.encode("HELLO YOU").unwrap_err().contains("`YOU` (position 1"));
        std::fs::write(&list, "HELLO\nHELLO\n").unwrap();
        assert!(Vocabulary::read_gloss_list(&list).unwrap_err().to_string().contains("appears twice"));
        std::fs::write(&map, r#"{"ab": 0}"#).unwrap();
        assert!(Vocabulary::read_character_map(&map).unwrap_err().to_string().contains("not a single Character"));
    }
}
