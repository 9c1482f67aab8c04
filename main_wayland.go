//go:build wayland && !headless && cgo

package main

func init() { waylandBuild = true }
