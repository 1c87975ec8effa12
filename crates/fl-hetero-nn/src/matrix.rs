//! A small dense row-major matrix, the one shape type of the crate.

use crate::error::{ApiMisuse, Error};

/// A dense `rows × cols` matrix stored row by row.
#[derive(Clone, PartialEq, Eq)]
pub struct Matrix<T> {
    rows: usize,
    cols: usize,
    data: Vec<T>,
}

impl<T> core::fmt::Debug for Matrix<T> {
    // Matrices may hold secrets (activations, masks, weights): print the shape only.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Matrix({}×{}, ..)", self.rows, self.cols)
    }
}

impl<T> Matrix<T> {
    /// Builds a matrix from row-major data; the length must be `rows · cols`.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<T>) -> Result<Self, Error> {
        match rows.checked_mul(cols) {
            Some(len) if len == data.len() => Ok(Self { rows, cols, data }),
            _ => Err(Error::ApiMisuse(ApiMisuse::ShapeMismatch {
                what: "matrix data",
                expected: (rows, cols),
                got: (data.len(), 1),
            })),
        }
    }

    /// Builds a matrix by calling `f(row, col)` for every entry.
    pub fn from_fn(rows: usize, cols: usize, mut f: impl FnMut(usize, usize) -> T) -> Self {
        let mut data = Vec::with_capacity(rows.saturating_mul(cols));
        for i in 0..rows {
            for j in 0..cols {
                data.push(f(i, j));
            }
        }
        Self { rows, cols, data }
    }

    /// Builds a matrix from a list of equally long rows.
    pub fn from_rows(rows: Vec<Vec<T>>) -> Result<Self, Error> {
        let r = rows.len();
        let c = rows.first().map_or(0, Vec::len);
        let mut data = Vec::with_capacity(r * c);
        for row in rows {
            if row.len() != c {
                return Err(Error::ApiMisuse(ApiMisuse::ShapeMismatch {
                    what: "matrix row",
                    expected: (1, c),
                    got: (1, row.len()),
                }));
            }
            data.extend(row);
        }
        Ok(Self {
            rows: r,
            cols: c,
            data,
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// The entry at `(i, j)`, or `None` outside the matrix.
    pub fn get(&self, i: usize, j: usize) -> Option<&T> {
        if i < self.rows && j < self.cols {
            self.data.get(i * self.cols + j)
        } else {
            None
        }
    }

    /// Mutable entry at `(i, j)`, or `None` outside the matrix.
    pub fn get_mut(&mut self, i: usize, j: usize) -> Option<&mut T> {
        if i < self.rows && j < self.cols {
            self.data.get_mut(i * self.cols + j)
        } else {
            None
        }
    }

    /// Row `i` as a slice (empty outside the matrix).
    pub fn row(&self, i: usize) -> &[T] {
        if i < self.rows {
            &self.data[i * self.cols..(i + 1) * self.cols]
        } else {
            &[]
        }
    }

    /// The row-major entries.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The row-major entries, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// Consumes the matrix and returns its row-major entries.
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }

    /// Applies `f` to every entry.
    pub fn map<U>(&self, f: impl FnMut(&T) -> U) -> Matrix<U> {
        Matrix {
            rows: self.rows,
            cols: self.cols,
            data: self.data.iter().map(f).collect(),
        }
    }

    /// Applies a fallible `f` to every entry, stopping at the first error.
    pub fn try_map<U, E>(&self, f: impl FnMut(&T) -> Result<U, E>) -> Result<Matrix<U>, E> {
        let data = self.data.iter().map(f).collect::<Result<Vec<U>, E>>()?;
        Ok(Matrix {
            rows: self.rows,
            cols: self.cols,
            data,
        })
    }

    /// Returns an error unless the shape is `expected`.
    pub fn check_shape(&self, what: &'static str, expected: (usize, usize)) -> Result<(), Error> {
        if self.shape() == expected {
            Ok(())
        } else {
            Err(Error::ApiMisuse(ApiMisuse::ShapeMismatch {
                what,
                expected,
                got: self.shape(),
            }))
        }
    }

    /// Selects rows by index (indices must be in range).
    pub fn select_rows(&self, indices: &[usize]) -> Result<Self, Error>
    where
        T: Clone,
    {
        let mut data = Vec::with_capacity(indices.len() * self.cols);
        for &i in indices {
            if i >= self.rows {
                return Err(Error::ApiMisuse(ApiMisuse::IndexOutOfRange {
                    index: i,
                    len: self.rows,
                }));
            }
            data.extend_from_slice(self.row(i));
        }
        Ok(Self {
            rows: indices.len(),
            cols: self.cols,
            data,
        })
    }
}

impl<T: Clone> Matrix<T> {
    /// A matrix with every entry equal to `value`.
    pub fn filled(rows: usize, cols: usize, value: T) -> Self {
        Self {
            rows,
            cols,
            data: vec![value; rows.saturating_mul(cols)],
        }
    }

    /// The transpose.
    pub fn transpose(&self) -> Self {
        Self::from_fn(self.cols, self.rows, |i, j| {
            self.data[j * self.cols + i].clone()
        })
    }
}

impl Matrix<f64> {
    /// A matrix of zeros.
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self::filled(rows, cols, 0.0)
    }

    /// The matrix product `self · rhs` (inner dimensions must agree).
    pub fn matmul(&self, rhs: &Self) -> Result<Self, Error> {
        if self.cols != rhs.rows {
            return Err(Error::ApiMisuse(ApiMisuse::ShapeMismatch {
                what: "matrix product",
                expected: (self.cols, rhs.cols),
                got: rhs.shape(),
            }));
        }
        let mut out = Self::zeros(self.rows, rhs.cols);
        for i in 0..self.rows {
            for k in 0..self.cols {
                let a = self.data[i * self.cols + k];
                for j in 0..rhs.cols {
                    out.data[i * rhs.cols + j] += a * rhs.data[k * rhs.cols + j];
                }
            }
        }
        Ok(out)
    }

    /// Entrywise sum; shapes must agree.
    pub fn add(&self, rhs: &Self) -> Result<Self, Error> {
        rhs.check_shape("matrix sum", self.shape())?;
        Ok(Self {
            rows: self.rows,
            cols: self.cols,
            data: self
                .data
                .iter()
                .zip(&rhs.data)
                .map(|(a, b)| a + b)
                .collect(),
        })
    }

    /// Adds `bias[j]` to every entry of column `j`.
    pub fn add_row_vector(&self, bias: &[f64]) -> Result<Self, Error> {
        if bias.len() != self.cols {
            return Err(Error::ApiMisuse(ApiMisuse::ShapeMismatch {
                what: "bias vector",
                expected: (1, self.cols),
                got: (1, bias.len()),
            }));
        }
        Ok(Self::from_fn(self.rows, self.cols, |i, j| {
            self.data[i * self.cols + j] + bias[j]
        }))
    }

    /// Column sums.
    pub fn column_sums(&self) -> Vec<f64> {
        let mut s = vec![0.0; self.cols];
        for i in 0..self.rows {
            for (j, v) in self.row(i).iter().enumerate() {
                s[j] += v;
            }
        }
        s
    }

    /// Returns an error naming `what` if any entry is NaN or infinite.
    pub fn check_finite(&self, what: &'static str) -> Result<(), Error> {
        if self.data.iter().all(|x| x.is_finite()) {
            Ok(())
        } else {
            Err(Error::ApiMisuse(ApiMisuse::NonFinite { what }))
        }
    }
}

impl<T: zeroize::Zeroize> zeroize::Zeroize for Matrix<T> {
    fn zeroize(&mut self) {
        self.data.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_checked() {
        assert!(Matrix::from_vec(2, 2, vec![1.0; 3]).is_err());
        assert!(Matrix::from_vec(usize::MAX, 2, vec![1.0; 3]).is_err());
        let a = Matrix::from_vec(2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = Matrix::from_vec(2, 2, vec![1.0; 4]).unwrap();
        assert!(a.matmul(&b).is_err());
        let c = a.matmul(&a.transpose()).unwrap();
        assert_eq!(c.as_slice(), &[14.0, 32.0, 32.0, 77.0]);
        assert!(a.select_rows(&[5]).is_err());
        assert_eq!(a.select_rows(&[1]).unwrap().as_slice(), &[4.0, 5.0, 6.0]);
        assert!(Matrix::from_rows(vec![vec![1.0], vec![1.0, 2.0]]).is_err());
        assert_eq!(format!("{a:?}"), "Matrix(2×3, ..)");
    }
}
