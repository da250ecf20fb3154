//! SQL92 property filters with RocketMQ's grammar and evaluation rules (ENGINE.md 3.2-3.3).
//!
//! [`SqlFilter::parse`] lexes and parses an expression the way the broker's generated
//! `SelectorParser` does: keywords are case-insensitive, `NOT` binds tighter than comparisons,
//! the operand checks of `ComparisonExpression` run at parse time, and the parser stops at the
//! first token it cannot use and ignores the rest. [`SqlFilter::evaluate`] follows the filter
//! module's three-valued logic on a message's string properties, with Java's string-to-number
//! coercions (`Integer.valueOf`, `Long.valueOf`, `Double.valueOf`, `Boolean.valueOf`) and
//! `Double.compareTo`. Any evaluation error means "no match", as `isMatchedByCommitLog` does.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

/// Which broker's grammar: 5.x adds `CONTAINS`, `STARTSWITH` and `ENDSWITH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SqlDialect {
    V4_9,
    #[default]
    V5,
}

/// Why an expression does not compile (the broker's `MQFilterException`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid SQL92 expression at character {position}: {reason}")]
pub struct SqlError {
    /// Character position (0-based) of the token where parsing failed.
    pub position: usize,
    pub reason: String,
}

/// A value during evaluation: Java's `Integer`, `Long`, `Double`, `String`, `Boolean` or `null`.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    /// `doCreateEqual`: `=`, `IS NULL`.
    Eq,
    Gt,
    Ge,
    Lt,
    Le,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StrOp {
    Contains,
    StartsWith,
    EndsWith,
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Const(SqlValue),
    Prop(String),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    BoolCast(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    In {
        prop: String,
        list: Vec<String>,
        not: bool,
    },
    Str {
        op: StrOp,
        left: Box<Expr>,
        value: String,
        not: bool,
    },
}

impl Expr {
    /// Java `instanceof BooleanExpression`.
    fn is_boolean(&self) -> bool {
        match self {
            Expr::Const(v) => matches!(v, SqlValue::Bool(_) | SqlValue::Null),
            Expr::Prop(_) | Expr::Neg(_) => false,
            _ => true,
        }
    }
}

/// A compiled SQL92 filter.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlFilter {
    expression: String,
    root: Expr,
}

/// Why evaluation stopped (Java threw); the filter then does not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError(pub String);

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

type Eval = Result<SqlValue, EvalError>;

impl SqlFilter {
    /// Compile with the 5.x grammar.
    pub fn parse(expr: &str) -> Result<Self, SqlError> {
        Self::parse_with(expr, SqlDialect::V5)
    }

    /// Compile with a given broker's grammar.
    pub fn parse_with(expr: &str, dialect: SqlDialect) -> Result<Self, SqlError> {
        let tokens = lex(expr, dialect);
        let mut p = Parser { tokens, pos: 0 };
        let e = p.or_expr()?;
        let root = p.as_boolean(e)?;
        Ok(SqlFilter {
            expression: expr.to_string(),
            root,
        })
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Three-valued result: `Ok(Bool)`, `Ok(Null)` (unknown), or the error Java would throw.
    pub fn evaluate(&self, props: &dyn Fn(&str) -> Option<String>) -> Result<SqlValue, EvalError> {
        eval(&self.root, props)
    }

    /// The broker's decision: a match only on TRUE; unknown, non-boolean and errors do not match.
    pub fn matches(&self, props: &dyn Fn(&str) -> Option<String>) -> bool {
        matches!(self.evaluate(props), Ok(SqlValue::Bool(true)))
    }

    /// [`SqlFilter::matches`] over a property map.
    pub fn matches_map(&self, props: &BTreeMap<String, String>) -> bool {
        self.matches(&|k| props.get(k).cloned())
    }
}

impl fmt::Display for SqlFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expression)
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, PartialEq)]
enum Tok {
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

fn keyword(word: &str, dialect: SqlDialect) -> Option<Tok> {
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

fn is_id_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$'
}

fn is_id_part(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// Length in chars of `digits+` at `i`.
fn digits_at(s: &[char], i: usize) -> usize {
    s.get(i..)
        .map(|r| r.iter().take_while(|c| c.is_ascii_digit()).count())
        .unwrap_or(0)
}

/// Length of an exponent `E [+-]? digits+` at `i`, 0 when there is none.
fn exponent_at(s: &[char], i: usize) -> usize {
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
fn number_at(s: &[char], i: usize) -> Option<(usize, bool)> {
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
fn lex(text: &str, dialect: SqlDialect) -> Vec<(usize, Tok)> {
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

// ---------------------------------------------------------------------------------------------
// Parser

struct Parser {
    tokens: Vec<(usize, Tok)>,
    pos: usize,
}

fn err(position: usize, reason: impl Into<String>) -> SqlError {
    SqlError {
        position,
        reason: reason.into(),
    }
}

impl Parser {
    /// The token `k` ahead; reading a lexical error fails, as JavaCC's token manager does.
    fn peek(&self, k: usize) -> Result<&Tok, SqlError> {
        let (p, t) = self
            .tokens
            .get(self.pos + k)
            .or(self.tokens.last())
            .ok_or_else(|| err(0, "empty input"))?;
        match t {
            Tok::Error(why) => Err(err(*p, why.clone())),
            t => Ok(t),
        }
    }

    fn here(&self) -> usize {
        self.tokens
            .get(self.pos)
            .or(self.tokens.last())
            .map(|(p, _)| *p)
            .unwrap_or(0)
    }

    fn bump(&mut self) -> Result<Tok, SqlError> {
        let t = self.peek(0)?.clone();
        if t != Tok::Eof {
            self.pos += 1;
        }
        Ok(t)
    }

    fn expect(&mut self, want: &Tok, what: &str) -> Result<(), SqlError> {
        let at = self.here();
        if &self.bump()? == want {
            Ok(())
        } else {
            Err(err(at, format!("expected {what}")))
        }
    }

    /// `asBooleanExpression`: boolean expressions pass, a bare property becomes a boolean cast.
    fn as_boolean(&self, e: Expr) -> Result<Expr, SqlError> {
        if e.is_boolean() {
            Ok(e)
        } else if matches!(e, Expr::Prop(_)) {
            Ok(Expr::BoolCast(Box::new(e)))
        } else {
            Err(err(
                self.here(),
                "expression will not result in a boolean value",
            ))
        }
    }

    fn or_expr(&mut self) -> Result<Expr, SqlError> {
        let mut left = self.and_expr()?;
        while self.peek(0)? == &Tok::Or {
            self.bump()?;
            let right = self.and_expr()?;
            left = Expr::Or(
                Box::new(self.as_boolean(left)?),
                Box::new(self.as_boolean(right)?),
            );
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Expr, SqlError> {
        let mut left = self.equality_expr()?;
        while self.peek(0)? == &Tok::And {
            self.bump()?;
            let right = self.equality_expr()?;
            left = Expr::And(
                Box::new(self.as_boolean(left)?),
                Box::new(self.as_boolean(right)?),
            );
        }
        Ok(left)
    }

    fn equality_expr(&mut self) -> Result<Expr, SqlError> {
        let mut left = self.comparison_expr()?;
        loop {
            let at = self.here();
            match self.peek(0)? {
                Tok::Eq => {
                    self.bump()?;
                    let right = self.comparison_expr()?;
                    left = create_equal(left, right).map_err(|r| err(at, r))?;
                }
                Tok::Ne => {
                    self.bump()?;
                    let right = self.comparison_expr()?;
                    left = Expr::Not(Box::new(create_equal(left, right).map_err(|r| err(at, r))?));
                }
                Tok::Is => {
                    self.bump()?;
                    let is_null = Expr::Cmp(
                        CmpOp::Eq,
                        Box::new(left),
                        Box::new(Expr::Const(SqlValue::Null)),
                    );
                    if self.peek(0)? == &Tok::Null {
                        self.bump()?;
                        left = is_null;
                    } else {
                        self.expect(&Tok::Not, "NULL or NOT NULL after IS")?;
                        self.expect(&Tok::Null, "NULL after IS NOT")?;
                        left = Expr::Not(Box::new(is_null));
                    }
                }
                _ => return Ok(left),
            }
        }
    }

    fn comparison_expr(&mut self) -> Result<Expr, SqlError> {
        let mut left = self.unary_expr()?;
        loop {
            let at = self.here();
            let t = self.peek(0)?.clone();
            let op = match t {
                Tok::Gt => Some(CmpOp::Gt),
                Tok::Ge => Some(CmpOp::Ge),
                Tok::Lt => Some(CmpOp::Lt),
                Tok::Le => Some(CmpOp::Le),
                _ => None,
            };
            if let Some(op) = op {
                self.bump()?;
                let right = self.unary_expr()?;
                left = create_ordering(op, left, right).map_err(|r| err(at, r))?;
                continue;
            }
            let (not, head) = if t == Tok::Not {
                let next = self.peek(1)?.clone();
                if matches!(next, Tok::Between | Tok::In | Tok::StrOp(_)) {
                    (true, next)
                } else {
                    return Ok(left);
                }
            } else {
                (false, t)
            };
            match head {
                Tok::StrOp(op) => {
                    self.pos += 1 + usize::from(not);
                    let value = self.string_literal()?;
                    left = Expr::Str {
                        op,
                        left: Box::new(left),
                        value,
                        not,
                    };
                }
                Tok::Between => {
                    self.pos += 1 + usize::from(not);
                    let low = self.unary_expr()?;
                    self.expect(&Tok::And, "AND in BETWEEN")?;
                    let high = self.unary_expr()?;
                    left = if not {
                        create_not_between(left, low, high)
                    } else {
                        create_between(left, low, high)
                    }
                    .map_err(|r| err(at, r))?;
                }
                Tok::In => {
                    self.pos += 1 + usize::from(not);
                    self.expect(&Tok::LParen, "( after IN")?;
                    let mut list = vec![self.string_literal()?];
                    while self.peek(0)? == &Tok::Comma {
                        self.bump()?;
                        list.push(self.string_literal()?);
                    }
                    self.expect(&Tok::RParen, ") closing the IN list")?;
                    let Expr::Prop(prop) = left else {
                        return Err(err(at, "expected a property for IN"));
                    };
                    left = Expr::In { prop, list, not };
                }
                _ => return Ok(left),
            }
        }
    }

    fn string_literal(&mut self) -> Result<String, SqlError> {
        let at = self.here();
        match self.bump()? {
            Tok::Str(s) => Ok(s),
            _ => Err(err(at, "expected a string literal")),
        }
    }

    fn unary_expr(&mut self) -> Result<Expr, SqlError> {
        match self.peek(0)? {
            Tok::Plus => {
                self.bump()?;
                self.unary_expr()
            }
            Tok::Minus => {
                self.bump()?;
                Ok(Expr::Neg(Box::new(self.unary_expr()?)))
            }
            Tok::Not => {
                self.bump()?;
                let e = self.unary_expr()?;
                Ok(Expr::Not(Box::new(self.as_boolean(e)?)))
            }
            _ => self.primary_expr(),
        }
    }

    fn primary_expr(&mut self) -> Result<Expr, SqlError> {
        let at = self.here();
        match self.bump()? {
            Tok::Str(s) => Ok(Expr::Const(SqlValue::Str(s))),
            Tok::Decimal(t) => decimal_constant(&t).map_err(|r| err(at, r)),
            Tok::Float(t) => float_constant(&t).map_err(|r| err(at, r)),
            Tok::True => Ok(Expr::Const(SqlValue::Bool(true))),
            Tok::False => Ok(Expr::Const(SqlValue::Bool(false))),
            Tok::Null => Ok(Expr::Const(SqlValue::Null)),
            Tok::Id(name) => Ok(Expr::Prop(name)),
            Tok::LParen => {
                let e = self.or_expr()?;
                self.expect(&Tok::RParen, ")")?;
                Ok(e)
            }
            Tok::Eof => Err(err(at, "unexpected end of expression")),
            t => Err(err(at, format!("unexpected token {t:?}"))),
        }
    }
}

/// `ConstantExpression.createFromDecimal`: an optional `l`/`L` dropped; an `Integer` when it fits,
/// else a `Long`; beyond the i64 range, an error.
fn decimal_constant(text: &str) -> Result<Expr, String> {
    let digits = text.trim_end_matches(['l', 'L']);
    let v: i64 = digits
        .parse()
        .map_err(|_| format!("{text} is out of the long range"))?;
    Ok(Expr::Const(match i32::try_from(v) {
        Ok(i) => SqlValue::Int(i),
        Err(_) => SqlValue::Long(v),
    }))
}

/// `ConstantExpression.createFloat`: a `Double`, rejected when infinite or below
/// `Double.MIN_VALUE` (which rejects every literal equal to zero).
fn float_constant(text: &str) -> Result<Expr, String> {
    let v = java_parse_double(text).ok_or_else(|| format!("{text} is not a number"))?;
    if v > f64::MAX {
        return Err(format!("{text} is greater than Double.MAX_VALUE"));
    }
    if v < f64::from_bits(1) {
        return Err(format!("{text} is less than Double.MIN_VALUE"));
    }
    Ok(Expr::Const(SqlValue::Double(v)))
}

fn is_const(e: &Expr) -> bool {
    matches!(e, Expr::Const(_))
}

/// `ComparisonExpression.createEqual`: no NULL literal on either side; a boolean literal on the
/// left of another literal is refused (`checkEqualOperandCompatability`).
fn create_equal(left: Expr, right: Expr) -> Result<Expr, String> {
    for e in [&left, &right] {
        if let Expr::Const(SqlValue::Null) = e {
            return Err("NULL cannot be compared with = or <>; use IS NULL".into());
        }
    }
    if is_const(&left) && is_const(&right) && left.is_boolean() && !right.is_boolean() {
        return Err("a boolean literal cannot be compared with a non-boolean literal".into());
    }
    Ok(Expr::Cmp(CmpOp::Eq, Box::new(left), Box::new(right)))
}

/// `checkLessThanOperand`: only numeric literals, and no boolean expressions.
fn check_ordering_operand(e: &Expr) -> Result<(), String> {
    match e {
        Expr::Const(SqlValue::Int(_) | SqlValue::Long(_) | SqlValue::Double(_)) => Ok(()),
        Expr::Const(_) => Err("only numbers can be compared with >, >=, <, <=".into()),
        e if e.is_boolean() => {
            Err("a boolean expression cannot be compared with >, >=, <, <=".into())
        }
        _ => Ok(()),
    }
}

fn create_ordering(op: CmpOp, left: Expr, right: Expr) -> Result<Expr, String> {
    check_ordering_operand(&left)?;
    check_ordering_operand(&right)?;
    Ok(Expr::Cmp(op, Box::new(left), Box::new(right)))
}

/// `createBetween`: `x >= low AND x <= high`; two literal bounds must be in order.
fn create_between(value: Expr, low: Expr, high: Expr) -> Result<Expr, String> {
    if let (Expr::Const(l), Expr::Const(h)) = (&low, &high) {
        if matches!(l, SqlValue::Null) || matches!(h, SqlValue::Null) {
            return Err("BETWEEN bounds cannot be NULL".into());
        }
        let ord = java_compare(h, l).map_err(|e| e.0)?;
        if ord == Ordering::Less {
            return Err("BETWEEN: the low bound must not exceed the high bound".into());
        }
    }
    let ge = create_ordering(CmpOp::Ge, value.clone(), low)?;
    let le = create_ordering(CmpOp::Le, value, high)?;
    Ok(Expr::And(Box::new(ge), Box::new(le)))
}

/// `createNotBetween`: `x < low OR x > high`.
fn create_not_between(value: Expr, low: Expr, high: Expr) -> Result<Expr, String> {
    let lt = create_ordering(CmpOp::Lt, value.clone(), low)?;
    let gt = create_ordering(CmpOp::Gt, value, high)?;
    Ok(Expr::Or(Box::new(lt), Box::new(gt)))
}

// ---------------------------------------------------------------------------------------------
// Evaluation

fn as_bool(v: &SqlValue) -> Result<Option<bool>, EvalError> {
    match v {
        SqlValue::Null => Ok(None),
        SqlValue::Bool(b) => Ok(Some(*b)),
        other => Err(EvalError(format!("{other:?} is not a boolean"))),
    }
}

fn eval(e: &Expr, props: &dyn Fn(&str) -> Option<String>) -> Eval {
    match e {
        Expr::Const(v) => Ok(v.clone()),
        Expr::Prop(name) => Ok(props(name).map(SqlValue::Str).unwrap_or(SqlValue::Null)),
        Expr::Neg(inner) => Ok(match eval(inner, props)? {
            SqlValue::Int(i) => SqlValue::Int(i.wrapping_neg()),
            SqlValue::Long(l) => SqlValue::Long(l.wrapping_neg()),
            SqlValue::Double(d) => SqlValue::Double(-d),
            _ => SqlValue::Null,
        }),
        Expr::Not(inner) => Ok(match as_bool(&eval(inner, props)?)? {
            None => SqlValue::Null,
            Some(b) => SqlValue::Bool(!b),
        }),
        Expr::BoolCast(inner) => Ok(match eval(inner, props)? {
            SqlValue::Null => SqlValue::Null,
            SqlValue::Bool(b) => SqlValue::Bool(b),
            _ => SqlValue::Bool(false),
        }),
        Expr::And(l, r) => {
            let lv = as_bool(&eval(l, props)?)?;
            if lv == Some(false) {
                return Ok(SqlValue::Bool(false));
            }
            let rv = as_bool(&eval(r, props)?)?;
            Ok(match (lv, rv) {
                (_, Some(false)) => SqlValue::Bool(false),
                (Some(true), Some(true)) => SqlValue::Bool(true),
                _ => SqlValue::Null,
            })
        }
        Expr::Or(l, r) => {
            let lv = as_bool(&eval(l, props)?)?;
            if lv == Some(true) {
                return Ok(SqlValue::Bool(true));
            }
            let rv = as_bool(&eval(r, props)?)?;
            Ok(match (lv, rv) {
                (_, Some(true)) => SqlValue::Bool(true),
                (Some(false), Some(false)) => SqlValue::Bool(false),
                _ => SqlValue::Null,
            })
        }
        Expr::Cmp(CmpOp::Eq, l, r) => {
            let lv = eval(l, props)?;
            let rv = eval(r, props)?;
            Ok(match (&lv, &rv) {
                (SqlValue::Null, SqlValue::Null) => SqlValue::Bool(true),
                (SqlValue::Null, _) => SqlValue::Null,
                (_, SqlValue::Null) => SqlValue::Bool(false),
                _ if java_equals(&lv, &rv) => SqlValue::Bool(true),
                _ => SqlValue::Bool(java_compare(&lv, &rv)? == Ordering::Equal),
            })
        }
        Expr::Cmp(op, l, r) => {
            let lv = eval(l, props)?;
            if lv == SqlValue::Null {
                return Ok(SqlValue::Null);
            }
            let rv = eval(r, props)?;
            if rv == SqlValue::Null {
                return Ok(SqlValue::Null);
            }
            let ord = match (&lv, &rv) {
                (SqlValue::Str(a), SqlValue::Str(b)) => {
                    let (Some(a), Some(b)) = (java_parse_double(a), java_parse_double(b)) else {
                        return Err(EvalError(format!(
                            "strings {a:?} and {b:?} cannot be ordered"
                        )));
                    };
                    java_double_cmp(a, b)
                }
                _ => java_compare(&lv, &rv)?,
            };
            Ok(SqlValue::Bool(match op {
                CmpOp::Gt => ord == Ordering::Greater,
                CmpOp::Ge => ord != Ordering::Less,
                CmpOp::Lt => ord == Ordering::Less,
                _ => ord != Ordering::Greater,
            }))
        }
        Expr::In { prop, list, not } => Ok(match props(prop) {
            None => SqlValue::Null,
            Some(v) => SqlValue::Bool(list.contains(&v) ^ not),
        }),
        Expr::Str {
            op,
            left,
            value,
            not,
        } => {
            let SqlValue::Str(s) = eval(left, props)? else {
                return Ok(SqlValue::Bool(false));
            };
            if value.is_empty() {
                return Ok(SqlValue::Bool(false));
            }
            let hit = match op {
                StrOp::Contains => s.contains(value.as_str()),
                StrOp::StartsWith => s.starts_with(value.as_str()),
                StrOp::EndsWith => s.ends_with(value.as_str()),
            };
            Ok(SqlValue::Bool(hit ^ not))
        }
    }
}

/// Java `Object.equals` between two values (same class and equal value; `Double` by bits).
fn java_equals(a: &SqlValue, b: &SqlValue) -> bool {
    match (a, b) {
        (SqlValue::Double(x), SqlValue::Double(y)) => java_double_bits(*x) == java_double_bits(*y),
        _ => a == b,
    }
}

fn java_double_bits(d: f64) -> i64 {
    if d.is_nan() {
        0x7ff8_0000_0000_0000
    } else {
        d.to_bits() as i64
    }
}

/// `Double.compare`: `-0.0 < 0.0`, NaN equal to itself and above everything.
pub fn java_double_cmp(a: f64, b: f64) -> Ordering {
    if a < b {
        Ordering::Less
    } else if a > b {
        Ordering::Greater
    } else {
        java_double_bits(a).cmp(&java_double_bits(b))
    }
}

fn parse_err(what: &str, s: &str) -> EvalError {
    EvalError(format!("{what}.valueOf({s:?}) failed"))
}

fn as_int(s: &str) -> Result<i32, EvalError> {
    crate::format::java::parse_int(s).ok_or_else(|| parse_err("Integer", s))
}

fn as_long(s: &str) -> Result<i64, EvalError> {
    crate::format::java::parse_long(s).ok_or_else(|| parse_err("Long", s))
}

fn as_double(s: &str) -> Result<f64, EvalError> {
    java_parse_double(s).ok_or_else(|| parse_err("Double", s))
}

/// `ComparisonExpression.__compare` with string conversion on: widen numbers, parse a string
/// with the other side's type, `-1` ("less") for any other mix, an error when a parse fails or
/// a `Boolean` meets a `String` on its right (Java's cast fails there).
fn java_compare(a: &SqlValue, b: &SqlValue) -> Result<Ordering, EvalError> {
    use SqlValue::*;
    Ok(match (a, b) {
        (Bool(x), Bool(y)) => x.cmp(y),
        (Int(x), Int(y)) => x.cmp(y),
        (Long(x), Long(y)) => x.cmp(y),
        (Double(x), Double(y)) => java_double_cmp(*x, *y),
        (Str(x), Str(y)) => x.encode_utf16().cmp(y.encode_utf16()),
        (Bool(_), Str(_)) => {
            return Err(EvalError(
                "a boolean cannot be compared with a string on its right".into(),
            ))
        }
        (Int(x), Long(y)) => i64::from(*x).cmp(y),
        (Int(x), Double(y)) => java_double_cmp(f64::from(*x), *y),
        (Int(x), Str(y)) => x.cmp(&as_int(y)?),
        (Long(x), Int(y)) => x.cmp(&i64::from(*y)),
        (Long(x), Double(y)) => java_double_cmp(*x as f64, *y),
        (Long(x), Str(y)) => x.cmp(&as_long(y)?),
        (Double(x), Int(y)) => java_double_cmp(*x, f64::from(*y)),
        (Double(x), Long(y)) => java_double_cmp(*x, *y as f64),
        (Double(x), Str(y)) => java_double_cmp(*x, as_double(y)?),
        (Str(x), Bool(y)) => x.eq_ignore_ascii_case("true").cmp(y),
        (Str(x), Int(y)) => as_int(x)?.cmp(y),
        (Str(x), Long(y)) => as_long(x)?.cmp(y),
        (Str(x), Double(y)) => java_double_cmp(as_double(x)?, *y),
        _ => Ordering::Less,
    })
}

/// Java `Double.valueOf(String)`: surrounding characters up to U+0020 trimmed, an optional sign,
/// `NaN`, `Infinity`, decimal (`1`, `1.`, `.5`, `1e5`) or hexadecimal (`0x1.8p3`) forms, and an
/// optional `f`/`F`/`d`/`D` suffix.
pub fn java_parse_double(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let v = if body == "NaN" {
        f64::NAN
    } else if body == "Infinity" {
        f64::INFINITY
    } else if body.starts_with("0x") || body.starts_with("0X") {
        parse_hex_double(&body[2..])?
    } else {
        let body = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
        let b = body.as_bytes();
        let int = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut i = int;
        let mut frac = 0;
        if b.get(i) == Some(&b'.') {
            i += 1;
            frac = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            i += frac;
        }
        if int + frac == 0 {
            return None;
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let d = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            if d == 0 {
                return None;
            }
            i += d;
        }
        if i != b.len() {
            return None;
        }
        body.parse::<f64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// The part of a Java hexadecimal float after `0x`: `h[.h]p[+-]d` with an optional suffix.
fn parse_hex_double(s: &str) -> Option<f64> {
    let s = s.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(s);
    let (mant, exp) = s.split_once(['p', 'P'])?;
    let exp: i32 = {
        let d = exp.strip_prefix(['+', '-']).unwrap_or(exp);
        if d.is_empty() || !d.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        exp.parse().unwrap_or(if exp.starts_with('-') {
            -100_000
        } else {
            100_000
        })
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.len() + frac.len() == 0 {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars().chain(frac.chars()) {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let shift = exp.saturating_sub(4 * frac.len() as i32);
    Some(v * 2f64.powi(shift))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn m(expr: &str, pairs: &[(&str, &str)]) -> bool {
        SqlFilter::parse(expr)
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
            .matches_map(&props(pairs))
    }

    #[test]
    fn engine_md_consequence_table() {
        assert!(m("a > 10", &[("a", "15")]));
        for v in ["15.5", "3000000000", " 15"] {
            assert!(!m("a > 10", &[("a", v)]), "{v}");
        }
        for v in ["15.5", " 15.5 ", "NaN"] {
            assert!(m("a > 10.0", &[("a", v)]), "{v}");
        }
        assert!(m("a = 10", &[("a", "010")]));
        assert!(m("a = 10", &[("a", "+10")]));
        assert!(!m("a = 1", &[("a", "1.0")]));
        assert!(m("a = 1.0", &[("a", "1")]));
        assert!(m("a = TRUE", &[("a", "TRUE")]));
        assert!(m("a = TRUE", &[("a", "true")]));
        assert!(m("a = FALSE", &[("a", "xyz")]));
        assert!(!m("a = FALSE", &[("a", "True")]));
        assert!(!m("a = 'x'", &[]));
        assert!(!m("a <> 'x'", &[]));
        assert!(m("'x' <> a", &[]));
        assert!(m("a IS NULL", &[]));
        assert!(!m("a IS NULL", &[("a", "")]));
        assert!(m("a IS NOT NULL", &[("a", "")]));
        assert!(m("a IN ('x','y')", &[("a", "y")]));
        assert!(!m("a IN ('x','y')", &[("a", "z")]));
        assert!(m("a NOT IN ('x','y')", &[("a", "z")]));
        assert!(!m("a NOT IN ('x','y')", &[]));
        assert!(m("TAGS = 'TagA'", &[("TAGS", "TagA")]));
    }

    #[test]
    fn three_valued_logic() {
        // FALSE AND unknown = FALSE; TRUE OR unknown = TRUE; otherwise unknown does not match
        assert!(!m("a = 'x' AND b = 'y'", &[("a", "z")]));
        assert!(m("a = 'x' OR b = 'y'", &[("a", "x")]));
        assert!(m("b = 'y' OR a = 'x'", &[("a", "x")]));
        assert!(!m("a = 'x' AND b = 'y'", &[("a", "x")]));
        let f = SqlFilter::parse("b = 'y' AND a = 'x'").unwrap();
        assert_eq!(
            f.evaluate(&|k| (k == "a").then(|| "z".to_string())),
            Ok(SqlValue::Bool(false))
        );
        assert_eq!(f.evaluate(&|_| None), Ok(SqlValue::Null));
        // NOT null stays null
        assert!(!m("NOT (a = 'x')", &[]));
        assert!(m("NOT (a = 'x')", &[("a", "y")]));
        // an exception anywhere aborts the whole expression, even inside a TRUE OR
        assert!(!m("b > 1 OR a = 'x'", &[("a", "x"), ("b", "oops")]));
        assert!(m("a = 'x' OR b > 1", &[("a", "x"), ("b", "oops")]));
    }

    #[test]
    fn between_and_ordering() {
        assert!(m("a BETWEEN 1 AND 3", &[("a", "2")]));
        assert!(m("a BETWEEN 1 AND 3", &[("a", "3")]));
        assert!(!m("a BETWEEN 1 AND 3", &[("a", "4")]));
        assert!(m("a NOT BETWEEN 1 AND 3", &[("a", "4")]));
        assert!(!m("a NOT BETWEEN 1 AND 3", &[("a", "2")]));
        assert!(m("a BETWEEN -5 AND 5", &[("a", "-5")]));
        // 3 is an Integer: Integer.valueOf("2.5") fails
        assert!(!m("a >= 2.5 AND a < 3", &[("a", "2.5")]));
        assert!(m("a >= 2.5 AND a < 3.0", &[("a", "2.5")]));
        // two properties are both parsed as doubles
        assert!(m("a < b", &[("a", "1.5"), ("b", "2")]));
        assert!(!m("a < b", &[("a", "x"), ("b", "2")]));
        // long literals
        assert!(m("a > 2147483648", &[("a", "2147483649")]));
        // 2147483647 is an Integer literal: Integer.valueOf("2147483648") throws
        assert!(!m("a > 2147483647", &[("a", "2147483648")]));
        assert!(m("a = 5L", &[("a", "5")]));
        // NaN sorts above everything, -0.0 below 0.0
        assert!(m("a > 1.0E300", &[("a", "NaN")]));
        assert!(m("a < 1.0E-300", &[("a", "-0.0")]));
        // unary minus on a property is unknown
        assert!(!m("-a < 0", &[("a", "5")]));
    }

    #[test]
    fn parse_rules() {
        for bad in [
            "",
            "a > 'x'",
            "'x' < a",
            "a > TRUE",
            "a = NULL",
            "NULL = a",
            "a BETWEEN 3 AND 1",
            "'x' IN ('a')",
            "a IN (1)",
            "a = \"x\"",
            "0.0 < a",
            "a > .0",
            "a > 1E999",
            "a > 99999999999999999999",
            "NOT 5",
            "5",
            "'abc'",
            "TRUE = 1",
            "a IS 5",
            "(a = 'x'",
            "a > (b = 'c')",
            "a = 'x' /* unterminated",
            "a = 'unterminated",
            "a # b",
        ] {
            assert!(SqlFilter::parse(bad).is_err(), "{bad:?} should not parse");
        }
        for good in [
            "a = 'x' b = 'y'",
            "a = 'x' )",
            "a = 'x' -- comment\n AND b = 'y'",
            "a = 'x' -- trailing comment without newline",
            "a = 'x' /* c */ AND b IS NULL",
            "a = 'it''s'",
            "A = 'x' and b = 'y' OR c IS NOT NULL",
            "1 = TRUE",
            "NULL",
            "TRUE",
            "a",
            "NOT a",
            "a = 5.",
            "a = 5E3",
            "a = 010",
        ] {
            assert!(SqlFilter::parse(good).is_ok(), "{good:?} should parse");
        }
        // the rest after the first unusable token is ignored
        assert!(m("a = 'x' b = 'y'", &[("a", "x")]));
        assert!(m("a = 'it''s'", &[("a", "it's")]));
        // "010" lexes as 0 then 10: "a = 0" followed by an ignored token
        assert!(m("a = 010", &[("a", "0")]));
        // keywords are case-insensitive, properties are not
        assert!(m("a = 'x' and B is null", &[("a", "x"), ("b", "1")]));
        // NOT binds tighter than comparisons: (NOT a) = 'x'
        assert!(!m("NOT a = 'x'", &[("a", "y")]));
        // a bare property is FALSE when present, so NOT a is TRUE
        assert!(!m("a", &[("a", "true")]));
        assert!(m("NOT a", &[("a", "true")]));
        assert!(!m("NOT a", &[]));
        assert!(!m("NULL", &[]));
        // TRUE on the left of a string: Java's cast fails, no match
        assert!(!m("TRUE = a", &[("a", "true")]));
        assert!(!m("1 = TRUE", &[]));
    }

    #[test]
    fn dialects() {
        let f5 = SqlFilter::parse_with("a CONTAINS 'b'", SqlDialect::V5).unwrap();
        assert!(f5.matches_map(&props(&[("a", "abc")])));
        assert!(!f5.matches_map(&props(&[])));
        let not = SqlFilter::parse("a NOT CONTAINS 'b'").unwrap();
        assert!(not.matches_map(&props(&[("a", "xyz")])));
        assert!(!not.matches_map(&props(&[])));
        assert!(m("a STARTSWITH 'ab' AND a ENDSWITH 'bc'", &[("a", "abc")]));
        assert!(!m("a CONTAINS ''", &[("a", "abc")]));
        // 4.9: CONTAINS is an identifier, so the expression is the bare property a
        let f4 = SqlFilter::parse_with("a CONTAINS 'b'", SqlDialect::V4_9).unwrap();
        assert!(!f4.matches_map(&props(&[("a", "abc")])));
    }

    #[test]
    fn java_doubles() {
        assert_eq!(java_parse_double("1e3"), Some(1000.0));
        assert_eq!(java_parse_double(" 15.5 "), Some(15.5));
        assert_eq!(java_parse_double("+.5"), Some(0.5));
        assert_eq!(java_parse_double("5."), Some(5.0));
        assert_eq!(java_parse_double("2d"), Some(2.0));
        assert_eq!(java_parse_double("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(java_parse_double("NaN").is_some_and(f64::is_nan));
        assert_eq!(java_parse_double("0x1p3"), Some(8.0));
        assert_eq!(java_parse_double("0x1.8p1"), Some(3.0));
        for bad in ["", ".", "e5", "1e", "inf", "nan", "1.2.3", "0x1", "1 2"] {
            assert_eq!(java_parse_double(bad), None, "{bad}");
        }
        assert_eq!(java_double_cmp(-0.0, 0.0), Ordering::Less);
        assert_eq!(java_double_cmp(f64::NAN, f64::INFINITY), Ordering::Greater);
        assert_eq!(java_double_cmp(f64::NAN, f64::NAN), Ordering::Equal);
    }
}
