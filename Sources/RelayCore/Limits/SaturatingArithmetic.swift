extension Int64 {
    /// `self + other`, clamped to `Int64`'s range instead of trapping: deadlines from a token's
    /// `exp` and a leeway may be anything a client put in them.
    public func saturatingAdding(_ other: Int64) -> Int64 {
        let (r, o) = addingReportingOverflow(other)
        return o ? (other > 0 ? .max : .min) : r
    }

    /// `self - other`, clamped to `Int64`'s range instead of trapping.
    public func saturatingSubtracting(_ other: Int64) -> Int64 {
        let (r, o) = subtractingReportingOverflow(other)
        return o ? (other < 0 ? .max : .min) : r
    }
}
