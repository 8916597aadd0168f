public enum RelayVersion { public static let string = "0.1.0" }
