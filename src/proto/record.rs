//! The `Record` trait every jute record implements, and the field encodings
//! that records are built from.

use super::{DecodeError, Reader, Writer};

/// A jute record: fields in declaration order, no tags, no padding.
pub trait Record: Sized {
    /// The fewest bytes an encoding can take; bounds vector allocations.
    const MIN_SIZE: usize;

    /// Appends the encoding of `self`.
    fn write(&self, w: &mut Writer<'_>);

    /// Reads one record from the cursor.
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError>;

    /// How many results a reply to this request may hold, a bound its
    /// decoding keeps to: a transaction's op count. Other replies hold no
    /// results, and other records leave it unbounded.
    fn max_results(&self) -> usize {
        usize::MAX
    }

    /// The encoding of `self`, without a frame prefix.
    fn to_bytes(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        self.write(&mut Writer::new(&mut buf));
        buf
    }

    /// Decodes a record that must fill `bytes` exactly. Bytes left over
    /// are an error in the record's name (`GetDataResponse: 1 unexpected
    /// trailing byte(s)`).
    fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let record = Self::read(&mut r)?;
        r.finish().map_err(|e| e.in_field(name_of::<Self>()))?;
        Ok(record)
    }
}

/// A type's name without its module path, as errors name a record; the
/// unit record is the empty body of a reply that carries none.
pub(crate) fn name_of<T>() -> &'static str {
    match std::any::type_name::<T>() {
        "()" => "empty body",
        name => name.rsplit("::").next().unwrap_or(name),
    }
}

/// One field of a record: how a Rust type maps to a jute type. The record
/// names the field in its errors (see [`DecodeError::InField`]).
pub trait Field: Sized {
    /// The fewest bytes the field can take.
    const MIN_SIZE: usize;
    /// Appends the field.
    fn write_field(&self, w: &mut Writer<'_>);
    /// Reads the field.
    fn read_field(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

impl Field for i32 {
    const MIN_SIZE: usize = 4;
    fn write_field(&self, w: &mut Writer<'_>) {
        w.write_i32(*self);
    }
    fn read_field(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_i32()
    }
}

impl Field for i64 {
    const MIN_SIZE: usize = 8;
    fn write_field(&self, w: &mut Writer<'_>) {
        w.write_i64(*self);
    }
    fn read_field(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_i64()
    }
}

impl Field for bool {
    const MIN_SIZE: usize = 1;
    fn write_field(&self, w: &mut Writer<'_>) {
        w.write_bool(*self);
    }
    fn read_field(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_bool()
    }
}

/// A `ustring` that the protocol never sends as null.
impl Field for String {
    const MIN_SIZE: usize = 4;
    fn write_field(&self, w: &mut Writer<'_>) {
        w.write_str(self);
    }
    fn read_field(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_string()
    }
}

/// A `buffer` that the protocol never sends as null.
impl Field for Vec<u8> {
    const MIN_SIZE: usize = 4;
    fn write_field(&self, w: &mut Writer<'_>) {
        w.write_buffer(self);
    }
    fn read_field(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_buffer().map(<[u8]>::to_vec)
    }
}

/// A `buffer` where null (-1) and empty mean different things, such as the
/// data of a node created with null data.
impl Field for Option<Vec<u8>> {
    const MIN_SIZE: usize = 4;
    fn write_field(&self, w: &mut Writer<'_>) {
        w.write_opt_buffer(self.as_deref());
    }
    fn read_field(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(r.read_opt_buffer()?.map(<[u8]>::to_vec))
    }
}

/// A non-null `vector<ustring>`.
impl Field for Vec<String> {
    const MIN_SIZE: usize = 4;
    fn write_field(&self, w: &mut Writer<'_>) {
        w.write_string_vec(self);
    }
    fn read_field(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_string_vec()
    }
}

/// Implements [`Record`] and [`Field`] for a struct whose fields all implement
/// [`Field`], encoded in declaration order.
macro_rules! record {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::proto::Record for $name {
            const MIN_SIZE: usize = 0 $( + <$ty as $crate::proto::Field>::MIN_SIZE )*;

            #[allow(unused_variables)]
            fn write(&self, w: &mut $crate::proto::Writer<'_>) {
                $( $crate::proto::Field::write_field(&self.$field, w); )*
            }

            #[allow(unused_variables)]
            fn read(r: &mut $crate::proto::Reader<'_>) -> Result<Self, $crate::proto::DecodeError> {
                Ok($name {
                    $( $field: <$ty as $crate::proto::Field>::read_field(r).map_err(|e| {
                        e.in_field(concat!(stringify!($name), ".", stringify!($field)))
                    })?, )*
                })
            }
        }

        impl $crate::proto::Field for $name {
            const MIN_SIZE: usize = <$name as $crate::proto::Record>::MIN_SIZE;
            fn write_field(&self, w: &mut $crate::proto::Writer<'_>) {
                $crate::proto::Record::write(self, w);
            }
            fn read_field(
                r: &mut $crate::proto::Reader<'_>,
            ) -> Result<Self, $crate::proto::DecodeError> {
                $crate::proto::Record::read(r)
            }
        }
    };
}

/// Implements [`Field`] for a non-null `vector` of a record type.
macro_rules! record_vec_field {
    ($($ty:ty),* $(,)?) => {$(
        impl $crate::proto::Field for Vec<$ty> {
            const MIN_SIZE: usize = 4;
            fn write_field(&self, w: &mut $crate::proto::Writer<'_>) {
                w.write_vec(self, |w, item| $crate::proto::Record::write(item, w));
            }
            fn read_field(
                r: &mut $crate::proto::Reader<'_>,
            ) -> Result<Self, $crate::proto::DecodeError> {
                r.read_vec(<$ty as $crate::proto::Record>::MIN_SIZE, |r| {
                    $crate::proto::Record::read(r)
                })
            }
        }
    )*};
}
