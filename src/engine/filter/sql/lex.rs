//! The lexer: tokens as the broker's generated `SelectorParserTokenManager` cuts them.

use super::*;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Not,
    And,
    Or,
    Between,
    In,
    True,
    False,
    Null,
    Is,
    StrOp(StrOp),
    Decimal(String),
    Float(String),
    Str(String),
    Id(String),
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Eof,
    /// A character no token starts with: a lexical error if the parser ever reads it.
    Error(String),
}

pub(super) fn keyword(word: &str, dialect: SqlDialect) -> Option<Tok> {
    let up = word.to_ascii_uppercase();
    Some(match up.as_str() {
        "NOT" => Tok::Not,
        "AND" => Tok::And,
        "OR" => Tok::Or,
        "BETWEEN" => Tok::Between,
        "IN" => Tok::In,
        "TRUE" => Tok::True,
        "FALSE" => Tok::False,
        "NULL" => Tok::Null,
        "IS" => Tok::Is,
        "CONTAINS" if dialect == SqlDialect::V5 => Tok::StrOp(StrOp::Contains),
        "STARTSWITH" if dialect == SqlDialect::V5 => Tok::StrOp(StrOp::StartsWith),
        "ENDSWITH" if dialect == SqlDialect::V5 => Tok::StrOp(StrOp::EndsWith),
        _ => return None,
    })
}

pub(super) fn is_id_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$'
}

pub(super) fn is_id_part(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// Length in chars of `digits+` at `i`.
pub(super) fn digits_at(s: &[char], i: usize) -> usize {
    s.get(i..)
        .map(|r| r.iter().take_while(|c| c.is_ascii_digit()).count())
        .unwrap_or(0)
}

/// Length of an exponent `E [+-]? digits+` at `i`, 0 when there is none.
pub(super) fn exponent_at(s: &[char], i: usize) -> usize {
    if !matches!(s.get(i), Some('e' | 'E')) {
        return 0;
    }
    let sign = usize::from(matches!(s.get(i + 1), Some('+' | '-')));
    let d = digits_at(s, i + 1 + sign);
    if d == 0 {
        0
    } else {
        1 + sign + d
    }
}

/// Longest numeric literal at `i`: (length, is_float).
pub(super) fn number_at(s: &[char], i: usize) -> Option<(usize, bool)> {
    let int_digits = digits_at(s, i);
    let mut float_len = 0;
    if int_digits > 0 {
        if s.get(i + int_digits) == Some(&'.') {
            let frac = digits_at(s, i + int_digits + 1);
            let e = exponent_at(s, i + int_digits + 1 + frac);
            float_len = int_digits + 1 + frac + e;
        } else {
            let e = exponent_at(s, i + int_digits);
            if e > 0 {
                float_len = int_digits + e;
            }
        }
    } else if s.get(i) == Some(&'.') {
        let frac = digits_at(s, i + 1);
        if frac > 0 {
            float_len = 1 + frac + exponent_at(s, i + 1 + frac);
        }
    }
    let dec_len = match s.get(i) {
        Some('0') => 1,
        Some(c) if c.is_ascii_digit() => {
            int_digits + usize::from(matches!(s.get(i + int_digits), Some('l' | 'L')))
        }
        _ => 0,
    };
    if float_len == 0 && dec_len == 0 {
        None
    } else if float_len > dec_len {
        Some((float_len, true))
    } else {
        Some((dec_len, false))
    }
}

/// Tokens with their start positions, up to the first lexical error (an `Error` token) or the end.
pub(super) fn lex(text: &str, dialect: SqlDialect) -> Vec<(usize, Tok)> {
    let s: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        // whitespace and comments
        loop {
            match s.get(i) {
                Some(' ' | '\t' | '\n' | '\r' | '\x0c') => i += 1,
                Some('-') if s.get(i + 1) == Some(&'-') => {
                    // A line comment needs its line end; without one, these are two minus signs.
                    match s[i..].iter().position(|&c| c == '\n' || c == '\r') {
                        Some(p) => i += p + 1,
                        None => break,
                    }
                }
                Some('/') if s.get(i + 1) == Some(&'*') => {
                    let end = s
                        .get(i + 2..)
                        .and_then(|r| r.windows(2).position(|w| w == ['*', '/']));
                    match end {
                        Some(p) => i += 2 + p + 2,
                        None => break,
                    }
                }
                _ => break,
            }
        }
        let start = i;
        let Some(&c) = s.get(i) else {
            out.push((start, Tok::Eof));
            return out;
        };
        let tok = if is_id_start(c) {
            let n = s[i..].iter().take_while(|&&c| is_id_part(c)).count();
            let word: String = s[i..i + n].iter().collect();
            i += n;
            keyword(&word, dialect).unwrap_or(Tok::Id(word))
        } else if c.is_ascii_digit() || c == '.' {
            match number_at(&s, i) {
                Some((n, float)) => {
                    let text: String = s[i..i + n].iter().collect();
                    i += n;
                    if float {
                        Tok::Float(text)
                    } else {
                        Tok::Decimal(text)
                    }
                }
                None => Tok::Error(format!("unexpected character {c:?}")),
            }
        } else if c == '\'' {
            let mut v = String::new();
            let mut j = i + 1;
            let mut closed = false;
            while let Some(&ch) = s.get(j) {
                if ch == '\'' {
                    if s.get(j + 1) == Some(&'\'') {
                        v.push('\'');
                        j += 2;
                        continue;
                    }
                    closed = true;
                    j += 1;
                    break;
                }
                v.push(ch);
                j += 1;
            }
            if closed {
                i = j;
                Tok::Str(v)
            } else {
                Tok::Error("unterminated string literal".into())
            }
        } else {
            let next = s.get(i + 1).copied();
            let (t, n) = match (c, next) {
                ('<', Some('>')) => (Tok::Ne, 2),
                ('<', Some('=')) => (Tok::Le, 2),
                ('>', Some('=')) => (Tok::Ge, 2),
                ('<', _) => (Tok::Lt, 1),
                ('>', _) => (Tok::Gt, 1),
                ('=', _) => (Tok::Eq, 1),
                ('(', _) => (Tok::LParen, 1),
                (')', _) => (Tok::RParen, 1),
                (',', _) => (Tok::Comma, 1),
                ('+', _) => (Tok::Plus, 1),
                ('-', _) => (Tok::Minus, 1),
                _ => (Tok::Error(format!("unexpected character {c:?}")), 0),
            };
            i += n;
            t
        };
        let stop = matches!(tok, Tok::Error(_));
        out.push((start, tok));
        if stop {
            return out;
        }
    }
}
