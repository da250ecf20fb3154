//! The parser: `SelectorParser`'s grammar and the operand checks `ComparisonExpression` runs
//! while it builds the expression.

use super::eval::java_compare;
use super::lex::Tok;
use super::*;
use std::cmp::Ordering;

pub(super) struct Parser {
    pub(super) tokens: Vec<(usize, Tok)>,
    pub(super) pos: usize,
}

pub(super) fn err(position: usize, reason: impl Into<String>) -> SqlError {
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
    pub(super) fn as_boolean(&self, e: Expr) -> Result<Expr, SqlError> {
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

    pub(super) fn or_expr(&mut self) -> Result<Expr, SqlError> {
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
pub(super) fn decimal_constant(text: &str) -> Result<Expr, String> {
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
pub(super) fn float_constant(text: &str) -> Result<Expr, String> {
    let v = java_parse_double(text).ok_or_else(|| format!("{text} is not a number"))?;
    if v > f64::MAX {
        return Err(format!("{text} is greater than Double.MAX_VALUE"));
    }
    if v < f64::from_bits(1) {
        return Err(format!("{text} is less than Double.MIN_VALUE"));
    }
    Ok(Expr::Const(SqlValue::Double(v)))
}

pub(super) fn is_const(e: &Expr) -> bool {
    matches!(e, Expr::Const(_))
}

/// `ComparisonExpression.createEqual`: no NULL literal on either side; a boolean literal on the
/// left of another literal is refused (`checkEqualOperandCompatability`).
pub(super) fn create_equal(left: Expr, right: Expr) -> Result<Expr, String> {
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
pub(super) fn check_ordering_operand(e: &Expr) -> Result<(), String> {
    match e {
        Expr::Const(SqlValue::Int(_) | SqlValue::Long(_) | SqlValue::Double(_)) => Ok(()),
        Expr::Const(_) => Err("only numbers can be compared with >, >=, <, <=".into()),
        e if e.is_boolean() => {
            Err("a boolean expression cannot be compared with >, >=, <, <=".into())
        }
        _ => Ok(()),
    }
}

pub(super) fn create_ordering(op: CmpOp, left: Expr, right: Expr) -> Result<Expr, String> {
    check_ordering_operand(&left)?;
    check_ordering_operand(&right)?;
    Ok(Expr::Cmp(op, Box::new(left), Box::new(right)))
}

/// `createBetween`: `x >= low AND x <= high`; two literal bounds must be in order.
pub(super) fn create_between(value: Expr, low: Expr, high: Expr) -> Result<Expr, String> {
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
pub(super) fn create_not_between(value: Expr, low: Expr, high: Expr) -> Result<Expr, String> {
    let lt = create_ordering(CmpOp::Lt, value.clone(), low)?;
    let gt = create_ordering(CmpOp::Gt, value, high)?;
    Ok(Expr::Or(Box::new(lt), Box::new(gt)))
}
