//! The atomics the shims hand out under `livecount_audit`: `std`'s, wrapped so that every
//! write (a store, a swap, every read-modify-write, a failed compare-and-swap included) is
//! recorded with its address and the source line that made it before it runs.
//!
//! A failed `compare_exchange` counts as a write: on x86 a `lock cmpxchg` takes the line in
//! exclusive state whether or not it succeeds, so it moves the line as a successful one does.
//! Loads are not recorded (a line that only one thread writes and many read is shared
//! read-mostly, which costs a transfer per write, and there are none).
//!
//! Each wrapper is `repr(transparent)` over its `std` atomic (same size and alignment, so
//! padding and the `PerCpu` cell stride do not change) and dereferences to it, so a method not
//! listed here (a read such as `as_ptr`, or `get_mut` on an owned value) still compiles and
//! behaves as `std`'s. Every writing method of `std`'s atomics is listed, so none escapes the
//! record.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::sync::atomic::{self as std_atomic, Ordering};

use super::recorder::record;

/// The read-modify-writes every atomic type has, recorded.
macro_rules! common {
    ($value:ty) => {
        /// [`std`]'s `store`, recorded.
        #[inline]
        #[track_caller]
        pub fn store(&self, value: $value, order: Ordering) {
            self.record(Location::caller());
            self.0.store(value, order);
        }

        /// [`std`]'s `swap`, recorded.
        #[inline]
        #[track_caller]
        pub fn swap(&self, value: $value, order: Ordering) -> $value {
            self.record(Location::caller());
            self.0.swap(value, order)
        }

        /// [`std`]'s `compare_exchange`, recorded whether or not it succeeds.
        #[inline]
        #[track_caller]
        pub fn compare_exchange(
            &self,
            current: $value,
            new: $value,
            success: Ordering,
            failure: Ordering,
        ) -> Result<$value, $value> {
            self.record(Location::caller());
            self.0.compare_exchange(current, new, success, failure)
        }

        /// [`std`]'s `compare_exchange_weak`, recorded whether or not it succeeds.
        #[inline]
        #[track_caller]
        pub fn compare_exchange_weak(
            &self,
            current: $value,
            new: $value,
            success: Ordering,
            failure: Ordering,
        ) -> Result<$value, $value> {
            self.record(Location::caller());
            self.0.compare_exchange_weak(current, new, success, failure)
        }

        /// [`std`]'s `fetch_update`, recorded once per attempt.
        #[inline]
        #[track_caller]
        pub fn fetch_update<F>(
            &self,
            set_order: Ordering,
            fetch_order: Ordering,
            mut f: F,
        ) -> Result<$value, $value>
        where
            F: FnMut($value) -> Option<$value>,
        {
            let site = Location::caller();
            self.0.fetch_update(set_order, fetch_order, |value| {
                let next = f(value);
                if next.is_some() {
                    self.record(site);
                }
                next
            })
        }

        #[inline]
        fn record(&self, site: &'static Location<'static>) {
            record(self.0.as_ptr().addr(), site);
        }
    };
}

/// A recorded read-modify-write delegating to `std`'s method of the same name.
macro_rules! rmw {
    ($($method:ident),* ; $value:ty) => {
        $(
            /// [`std`]'s method of this name, recorded.
            #[inline]
            #[track_caller]
            pub fn $method(&self, value: $value, order: Ordering) -> $value {
                self.record(Location::caller());
                self.0.$method(value, order)
            }
        )*
    };
}

/// What every wrapper has besides its writes: construction, `load`, `Deref` to `std`'s type,
/// `Debug`, `Default` and `From`.
macro_rules! wrapper {
    ($(#[$attr:meta])* $name:ident, $value:ty, $($generic:ident)?) => {
        $(#[$attr])*
        #[repr(transparent)]
        pub struct $name$(<$generic>)?(std_atomic::$name$(<$generic>)?);

        impl$(<$generic>)? $name$(<$generic>)? {
            /// A new atomic holding `value` (not a recorded write: nothing else can see it yet).
            #[inline]
            pub const fn new(value: $value) -> Self {
                $name(std_atomic::$name::new(value))
            }

            /// [`std`]'s `load` (not recorded).
            #[inline]
            pub fn load(&self, order: Ordering) -> $value {
                self.0.load(order)
            }

            /// The value, consuming the atomic.
            #[inline]
            pub fn into_inner(self) -> $value {
                self.0.into_inner()
            }

            common!($value);
        }

        impl$(<$generic>)? Deref for $name$(<$generic>)? {
            type Target = std_atomic::$name$(<$generic>)?;

            fn deref(&self) -> &Self::Target {
                &self.0
            }
        }

        impl$(<$generic>)? DerefMut for $name$(<$generic>)? {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.0
            }
        }

        impl$(<$generic>)? fmt::Debug for $name$(<$generic>)? {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl$(<$generic>)? From<$value> for $name$(<$generic>)? {
            fn from(value: $value) -> Self {
                $name::new(value)
            }
        }
    };
}

wrapper!(
    /// `std::sync::atomic::AtomicU64`, its writes recorded.
    AtomicU64, u64,
);
wrapper!(
    /// `std::sync::atomic::AtomicU32`, its writes recorded.
    AtomicU32, u32,
);
wrapper!(
    /// `std::sync::atomic::AtomicU16`, its writes recorded.
    AtomicU16, u16,
);
wrapper!(
    /// `std::sync::atomic::AtomicU8`, its writes recorded.
    AtomicU8, u8,
);
wrapper!(
    /// `std::sync::atomic::AtomicUsize`, its writes recorded.
    AtomicUsize, usize,
);
wrapper!(
    /// `std::sync::atomic::AtomicI64`, its writes recorded.
    AtomicI64, i64,
);
wrapper!(
    /// `std::sync::atomic::AtomicI32`, its writes recorded.
    AtomicI32, i32,
);
wrapper!(
    /// `std::sync::atomic::AtomicIsize`, its writes recorded.
    AtomicIsize, isize,
);
wrapper!(
    /// `std::sync::atomic::AtomicBool`, its writes recorded.
    AtomicBool, bool,
);
wrapper!(
    /// `std::sync::atomic::AtomicPtr`, its writes recorded.
    AtomicPtr, *mut T, T
);

/// The integer read-modify-writes, recorded.
macro_rules! integer {
    ($($name:ident: $value:ty),*) => {
        $(impl $name {
            rmw!(fetch_add, fetch_sub, fetch_and, fetch_nand, fetch_or, fetch_xor, fetch_max, fetch_min; $value);
        })*
    };
}
integer!(
    AtomicU64: u64, AtomicU32: u32, AtomicU16: u16, AtomicU8: u8, AtomicUsize: usize,
    AtomicI64: i64, AtomicI32: i32, AtomicIsize: isize
);

impl AtomicBool {
    rmw!(fetch_and, fetch_nand, fetch_or, fetch_xor; bool);
}

macro_rules! default {
    ($($name:ident: $zero:expr),*) => {
        $(impl Default for $name {
            fn default() -> Self {
                $name::new($zero)
            }
        })*
    };
}
default!(
    AtomicU64: 0, AtomicU32: 0, AtomicU16: 0, AtomicU8: 0, AtomicUsize: 0, AtomicI64: 0,
    AtomicI32: 0, AtomicIsize: 0, AtomicBool: false
);

impl<T> Default for AtomicPtr<T> {
    fn default() -> Self {
        AtomicPtr::new(std::ptr::null_mut())
    }
}
