package doctor

// DeviceOf names the disk (the filesystem's device) that holds dir, so
// two folders can be told to be on one disk: "major:minor" on unix, ""
// where it is unknown (then every folder counts as its own disk).
func DeviceOf(dir string) string { return deviceOf(dir) }
