//! The one CSV reading loop every loader shares: header check, typed rows, errors that name
//! file, line and column.

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::SimError;

/// A value that parsed but breaks a rule of the trace, found after deserialisation.
#[derive(Debug)]
pub(crate) struct Fault {
    pub(crate) column: &'static str,
    pub(crate) message: String,
}

impl Fault {
    pub(crate) fn new(column: &'static str, message: impl Into<String>) -> Self {
        Fault {
            column,
            message: message.into(),
        }
    }
}

/// Reads `path` and parses it with [`parse`].
pub(crate) fn read_file<R, T>(
    path: &Path,
    columns: &[&'static str],
    convert: impl FnMut(R) -> Result<T, Fault>,
) -> Result<Vec<T>, SimError>
where
    R: DeserializeOwned,
{
    let data = std::fs::read(path).map_err(|source| SimError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(path, &data, columns, convert)
}

/// Parses CSV text whose header must hold every name in `columns` (extra columns are ignored,
/// order is free). Each row is deserialised by header name into `R`, then `convert` checks it
/// and builds the public row. `file` is only used in errors.
pub(crate) fn parse<R, T>(
    file: &Path,
    data: &[u8],
    columns: &[&'static str],
    mut convert: impl FnMut(R) -> Result<T, Fault>,
) -> Result<Vec<T>, SimError>
where
    R: DeserializeOwned,
{
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(data);
    let headers = reader
        .headers()
        .map_err(|e| from_csv(file, None, None, e))?
        .clone();
    if let Some(column) = columns.iter().find(|c| !headers.iter().any(|h| h == **c)) {
        return Err(SimError::MissingColumn {
            file: file.to_owned(),
            column,
        });
    }
    let mut rows = Vec::with_capacity(bytecount_newlines(data));
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(from_csv(file, Some(&headers), None, e)),
        }
        let raw: R = record
            .deserialize(Some(&headers))
            .map_err(|e| from_csv(file, Some(&headers), Some(&record), e))?;
        let row = convert(raw).map_err(|fault| SimError::Malformed {
            file: file.to_owned(),
            line: record.position().map_or(0, |p| p.line()),
            column: fault.column.to_owned(),
            message: fault.message,
        })?;
        rows.push(row);
    }
    Ok(rows)
}

fn bytecount_newlines(data: &[u8]) -> usize {
    data.iter().filter(|&&b| b == b'\n').count()
}

/// Turns a `csv` error into [`SimError::Malformed`], naming the column by its header.
fn from_csv(
    file: &Path,
    headers: Option<&csv::StringRecord>,
    record: Option<&csv::StringRecord>,
    error: csv::Error,
) -> SimError {
    let column_name = |index: usize| -> String {
        headers
            .and_then(|h| h.get(index))
            .map_or_else(|| format!("#{}", index + 1), str::to_owned)
    };
    let malformed = |line: u64, column: String, message: String| SimError::Malformed {
        file: file.to_owned(),
        line,
        column,
        message,
    };
    let line_of = |pos: Option<&csv::Position>| pos.map_or(0, |p| p.line());
    match error.kind() {
        csv::ErrorKind::Io(e) => malformed(0, String::new(), format!("i/o error: {e}")),
        csv::ErrorKind::Utf8 { pos, err } => malformed(
            line_of(pos.as_ref()),
            column_name(err.field()),
            "invalid utf-8".to_owned(),
        ),
        csv::ErrorKind::UnequalLengths {
            pos,
            expected_len,
            len,
        } => {
            let column = if len < expected_len {
                column_name(*len as usize)
            } else {
                column_name(*expected_len as usize)
            };
            malformed(
                line_of(pos.as_ref()),
                column,
                format!("expected {expected_len} fields, found {len}"),
            )
        }
        csv::ErrorKind::Deserialize { pos, err } => {
            let (column, value) = match err.field() {
                Some(i) => {
                    let i = i as usize;
                    (column_name(i), record.and_then(|r| r.get(i)))
                }
                None => ("(unknown)".to_owned(), None),
            };
            let message = match value {
                Some(v) => format!("invalid value `{v}`: {}", err.kind()),
                None => err.kind().to_string(),
            };
            malformed(line_of(pos.as_ref()), column, message)
        }
        other => malformed(0, String::new(), format!("{other:?}").to_lowercase()),
    }
}
