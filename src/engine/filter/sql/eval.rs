//! Evaluation: the filter module's three-valued logic over string properties, with Java's
//! coercions and comparisons.

use super::*;
use std::cmp::Ordering;

pub(super) fn as_bool(v: &SqlValue) -> Result<Option<bool>, EvalError> {
    match v {
        SqlValue::Null => Ok(None),
        SqlValue::Bool(b) => Ok(Some(*b)),
        other => Err(EvalError(format!("{other:?} is not a boolean"))),
    }
}

pub(super) fn eval(e: &Expr, props: &dyn Fn(&str) -> Option<String>) -> Eval {
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
pub(super) fn java_equals(a: &SqlValue, b: &SqlValue) -> bool {
    match (a, b) {
        (SqlValue::Double(x), SqlValue::Double(y)) => java_double_bits(*x) == java_double_bits(*y),
        _ => a == b,
    }
}

pub(super) fn java_double_bits(d: f64) -> i64 {
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

pub(super) fn parse_err(what: &str, s: &str) -> EvalError {
    EvalError(format!("{what}.valueOf({s:?}) failed"))
}

pub(super) fn as_int(s: &str) -> Result<i32, EvalError> {
    crate::format::java::parse_int(s).ok_or_else(|| parse_err("Integer", s))
}

pub(super) fn as_long(s: &str) -> Result<i64, EvalError> {
    crate::format::java::parse_long(s).ok_or_else(|| parse_err("Long", s))
}

pub(super) fn as_double(s: &str) -> Result<f64, EvalError> {
    java_parse_double(s).ok_or_else(|| parse_err("Double", s))
}

/// `ComparisonExpression.__compare` with string conversion on: widen numbers, parse a string
/// with the other side's type, `-1` ("less") for any other mix, an error when a parse fails or
/// a `Boolean` meets a `String` on its right (Java's cast fails there).
pub(super) fn java_compare(a: &SqlValue, b: &SqlValue) -> Result<Ordering, EvalError> {
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
