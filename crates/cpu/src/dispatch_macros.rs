//! The `dispatch_*!` macros: they pick the Rust element type for a runtime dtype, like
//! PyTorch's `AT_DISPATCH_ALL_TYPES_AND3(Half, BFloat16, Bool, ...)`, and fail with PyTorch's
//! `"<name>" not implemented for '<dtype>'` for the dtypes a kernel does not support. They are
//! exported (`switchboard_cpu::dispatch_floating_types!`) so backend crates can use them too.

/// Runs `$body` with `$T` bound to the element type of `$dtype`, for every dtype (bool, the
/// integers, Half, BFloat16, Float, Double). `$body` must evaluate to a `Result`.
#[macro_export]
macro_rules! dispatch_all_types_and_bool {
    ($dtype:expr, $name:expr, $T:ident => $body:expr) => {{
        match $dtype {
            ::switchboard_tensor::ScalarType::Bool => {
                type $T = bool;
                $body
            }
            dt => $crate::dispatch_all_types!(dt, $name, $T => $body),
        }
    }};
}

/// Runs `$body` with `$T` bound to the element type of `$dtype` for the integers, Half,
/// BFloat16, Float and Double; `Bool` fails with `"<name>" not implemented for 'Bool'`.
#[macro_export]
macro_rules! dispatch_all_types {
    ($dtype:expr, $name:expr, $T:ident => $body:expr) => {{
        match $dtype {
            ::switchboard_tensor::ScalarType::Byte => {
                type $T = u8;
                $body
            }
            ::switchboard_tensor::ScalarType::Char => {
                type $T = i8;
                $body
            }
            ::switchboard_tensor::ScalarType::Short => {
                type $T = i16;
                $body
            }
            ::switchboard_tensor::ScalarType::Int => {
                type $T = i32;
                $body
            }
            ::switchboard_tensor::ScalarType::Long => {
                type $T = i64;
                $body
            }
            dt => $crate::dispatch_floating_types!(dt, $name, $T => $body),
        }
    }};
}

/// Runs `$body` with `$T` bound to the element type of `$dtype` for Half, BFloat16, Float and
/// Double; other dtypes fail with `"<name>" not implemented for '<dtype>'`.
#[macro_export]
macro_rules! dispatch_floating_types {
    ($dtype:expr, $name:expr, $T:ident => $body:expr) => {{
        match $dtype {
            ::switchboard_tensor::ScalarType::Half => {
                type $T = ::switchboard_tensor::f16;
                $body
            }
            ::switchboard_tensor::ScalarType::BFloat16 => {
                type $T = ::switchboard_tensor::bf16;
                $body
            }
            ::switchboard_tensor::ScalarType::Float => {
                type $T = f32;
                $body
            }
            ::switchboard_tensor::ScalarType::Double => {
                type $T = f64;
                $body
            }
            dt => Err($crate::error::not_implemented($name, dt)),
        }
    }};
}

/// Runs `$body` with `$T` bound to the element type of an integer `$dtype` (Byte, Char, Short,
/// Int, Long); other dtypes fail with `"<name>" not implemented for '<dtype>'`.
#[macro_export]
macro_rules! dispatch_integral_types {
    ($dtype:expr, $name:expr, $T:ident => $body:expr) => {{
        match $dtype {
            ::switchboard_tensor::ScalarType::Byte => {
                type $T = u8;
                $body
            }
            ::switchboard_tensor::ScalarType::Char => {
                type $T = i8;
                $body
            }
            ::switchboard_tensor::ScalarType::Short => {
                type $T = i16;
                $body
            }
            ::switchboard_tensor::ScalarType::Int => {
                type $T = i32;
                $body
            }
            ::switchboard_tensor::ScalarType::Long => {
                type $T = i64;
                $body
            }
            dt => Err($crate::error::not_implemented($name, dt)),
        }
    }};
}

/// Runs `$body` with `$T` bound to `i32` or `i64` for an index tensor's dtype; other dtypes
/// fail with `"<name>": Expected dtype int32/int64 for index`.
#[macro_export]
macro_rules! dispatch_index_types {
    ($dtype:expr, $name:expr, $T:ident => $body:expr) => {{
        match $dtype {
            ::switchboard_tensor::ScalarType::Int => {
                type $T = i32;
                $body
            }
            ::switchboard_tensor::ScalarType::Long => {
                type $T = i64;
                $body
            }
            dt => Err($crate::error::invalid(format!(
                "{}(): Expected dtype int32/int64 for index but got {}",
                $name,
                dt.c10_name()
            ))),
        }
    }};
}

/// Runs `$body` with `$C` bound to the element type of a complex `$dtype` (`Complex32`,
/// `Complex64`), like `AT_DISPATCH_COMPLEX_TYPES`; other dtypes fail with
/// `"<name>" not implemented for '<dtype>'`.
#[macro_export]
macro_rules! dispatch_complex_types {
    ($dtype:expr, $name:expr, $C:ident => $body:expr) => {{
        match $dtype {
            ::switchboard_tensor::ScalarType::ComplexFloat => {
                type $C = ::switchboard_tensor::Complex32;
                $body
            }
            ::switchboard_tensor::ScalarType::ComplexDouble => {
                type $C = ::switchboard_tensor::Complex64;
                $body
            }
            dt => Err($crate::error::not_implemented($name, dt)),
        }
    }};
}
