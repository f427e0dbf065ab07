//! A place in a pipeline's text: byte offset and length (for drawing a label under it) and the
//! 1-based line and column (characters) that the one-line `file:line:col` message names.

/// A range of a YAML text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the first character.
    pub offset: usize,
    /// Length in bytes (0: a point).
    pub len: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl Span {
    /// The start of a file.
    pub const START: Span = Span {
        offset: 0,
        len: 0,
        line: 1,
        column: 1,
    };

    /// No place: what a generated pipeline's errors have (line 0; `file:line:col` shows only
    /// the file).
    pub const NONE: Span = Span {
        offset: 0,
        len: 0,
        line: 0,
        column: 0,
    };

    /// The span of one character at 1-based `line` and `column` of `text` (a point past its end
    /// when there is no such character).
    pub fn at_line_col(text: &str, line: usize, column: usize) -> Span {
        let mut offset = 0;
        for (i, l) in text.split_inclusive('\n').enumerate() {
            if i + 1 == line {
                let within = l
                    .char_indices()
                    .nth(column.saturating_sub(1))
                    .map_or(l.trim_end_matches('\n').len(), |(b, _)| b);
                offset += within;
                break;
            }
            offset += l.len();
        }
        let len = text[offset.min(text.len())..]
            .chars()
            .next()
            .filter(|c| *c != '\n')
            .map_or(0, char::len_utf8);
        Span {
            offset,
            len,
            line,
            column,
        }
    }
}

impl Span {
    /// The span of the first `needle` inside `self` in `text` (itself when there is none).
    pub fn narrow(self, text: &str, needle: &str) -> Span {
        let Some(within) = text
            .get(self.offset..self.offset + self.len)
            .and_then(|s| s.find(needle))
        else {
            return self;
        };
        let offset = self.offset + within;
        let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
        Span {
            offset,
            len: needle.len(),
            line: text[..offset].matches('\n').count() + 1,
            column: text[line_start..offset].chars().count() + 1,
        }
    }
}

/// Converts the character indices a YAML parser reports into byte offsets.
pub struct Offsets<'a> {
    text: &'a str,
    /// Byte offset of each character, when the text is not ASCII (then the two differ).
    bytes: Option<Vec<usize>>,
}

impl<'a> Offsets<'a> {
    pub fn new(text: &'a str) -> Self {
        let bytes = (!text.is_ascii()).then(|| text.char_indices().map(|(b, _)| b).collect());
        Offsets { text, bytes }
    }

    pub fn text(&self) -> &'a str {
        self.text
    }

    /// Byte offset of the character at `index` (the text's length past its end).
    pub fn byte(&self, index: usize) -> usize {
        match &self.bytes {
            None => index.min(self.text.len()),
            Some(b) => b.get(index).copied().unwrap_or(self.text.len()),
        }
    }

    /// The span from character `start` to character `end` (exclusive) at 0-based `col`.
    pub fn span(&self, start: usize, end: usize, line: usize, col: usize) -> Span {
        let offset = self.byte(start);
        Span {
            offset,
            len: self.byte(end.max(start)) - offset,
            line,
            column: col + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_to_offset() {
        let text = "a: 1\nbé: x\n";
        assert_eq!(
            Span::at_line_col(text, 2, 5),
            Span {
                offset: 10,
                len: 1,
                line: 2,
                column: 5
            }
        );
        assert_eq!(Span::at_line_col(text, 9, 1).offset, text.len());
    }

    #[test]
    fn narrows_to_a_needle() {
        let text = "run: |\n  é {x}\n";
        let whole = Span {
            offset: 5,
            len: 10,
            line: 1,
            column: 6,
        };
        let s = whole.narrow(text, "{x}");
        assert_eq!((s.offset, s.len, s.line, s.column), (12, 3, 2, 5));
        assert_eq!(whole.narrow(text, "{y}"), whole);
    }

    #[test]
    fn character_indices_to_bytes() {
        let o = Offsets::new("é: x");
        assert_eq!(o.byte(1), 2);
        assert_eq!(o.span(3, 4, 1, 3).offset, 4);
        assert_eq!(o.byte(99), 5);
    }
}
