//! The element types accepted as 0/1 labels ([`LabelValue`]), shared by LabelDP and
//! k-ary randomized response's one-hot form (its own module so that neither of those
//! imports the other's).

mod sealed {
    pub trait Sealed {}
}

/// Element types accepted as labels (0/1 values): `bool`, `u8`, `i32`, `i64`, `f32`,
/// `f64`. Floating-point labels must be exactly 0.0 (or −0.0) or 1.0.
pub trait LabelValue: Copy + PartialEq + sealed::Sealed {
    /// The label 0.
    fn zero() -> Self;
    /// The label 1.
    fn one() -> Self;
    /// Whether the value is the label 0.
    fn is_zero(self) -> bool;
    /// Whether the value is the label 1.
    fn is_one(self) -> bool;
    /// The value as `f64`, for error messages.
    fn to_f64(self) -> f64;
}

macro_rules! label_value {
    ($($t:ty: $zero:expr, $one:expr);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl LabelValue for $t {
            fn zero() -> Self { $zero }
            fn one() -> Self { $one }
            fn is_zero(self) -> bool { self == $zero }
            fn is_one(self) -> bool { self == $one }
            fn to_f64(self) -> f64 { ToF64::into_f64(self) }
        }
    )*};
}

/// Lossless (or nearest) conversion of a label element for error reporting.
trait ToF64 {
    fn into_f64(self) -> f64;
}
impl ToF64 for bool {
    fn into_f64(self) -> f64 {
        f64::from(u8::from(self))
    }
}
impl ToF64 for u8 {
    fn into_f64(self) -> f64 {
        f64::from(self)
    }
}
impl ToF64 for i32 {
    fn into_f64(self) -> f64 {
        f64::from(self)
    }
}
impl ToF64 for i64 {
    fn into_f64(self) -> f64 {
        self as f64
    }
}
impl ToF64 for f32 {
    fn into_f64(self) -> f64 {
        f64::from(self)
    }
}
impl ToF64 for f64 {
    fn into_f64(self) -> f64 {
        self
    }
}

label_value! {
    bool: false, true;
    u8: 0, 1;
    i32: 0, 1;
    i64: 0, 1;
    f32: 0.0, 1.0;
    f64: 0.0, 1.0;
}
