//! SQL92 property filters with RocketMQ's grammar and evaluation rules (ENGINE.md 3.2-3.3).
//!
//! [`SqlFilter::parse`] lexes and parses an expression the way the broker's generated
//! `SelectorParser` does: keywords are case-insensitive, `NOT` binds tighter than comparisons,
//! the operand checks of `ComparisonExpression` run at parse time, and the parser stops at the
//! first token it cannot use and ignores the rest. [`SqlFilter::evaluate`] follows the filter
//! module's three-valued logic on a message's string properties, with Java's string-to-number
//! coercions (`Integer.valueOf`, `Long.valueOf`, `Double.valueOf`, `Boolean.valueOf`) and
//! `Double.compareTo`. Any evaluation error means "no match", as `isMatchedByCommitLog` does.

use std::collections::BTreeMap;
use std::fmt;

mod eval;
mod java_number;
mod lex;
mod parse;

pub use eval::java_double_cmp;
pub use java_number::java_parse_double;

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
        let tokens = lex::lex(expr, dialect);
        let mut p = parse::Parser { tokens, pos: 0 };
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
        eval::eval(&self.root, props)
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

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

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
