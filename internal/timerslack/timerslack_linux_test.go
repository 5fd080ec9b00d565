//go:build linux

package timerslack

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary run helper as a program of its own (TestMain): it prints
// "start" each time it starts (so a re-execution shows as two), calls Ensure with the
// slack in the variable, and prints the slack of its main thread and of new threads.
const helperEnv = "TIMERSLACK_TEST_HELPER"

func TestMain(m *testing.M) {
	if value := os.Getenv(helperEnv); value != "" {
		helper(value)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(value string) {
	fmt.Println("start")
	slack, _ := time.ParseDuration(value)
	if err := Ensure(slack); err != nil {
		fmt.Println("error:", err)
	}
	runtime.LockOSThread() // the main goroutine stays on this thread
	fmt.Println("main thread:", slackOfThisThread())
	for range 3 {
		// A thread created now, as the runtime creates them while the agent runs.
		done := make(chan int64)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			done <- slackOfThisThread()
		}()
		fmt.Println("new thread:", <-done)
	}
	fmt.Println("marker kept:", os.Getenv(reexecMarker) != "")
}

// slackOfThisThread is the calling thread's timer slack in ns, -1 if it cannot be read.
func slackOfThisThread() int64 {
	v, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return -1
	}
	return int64(v)
}

// runHelper runs the helper with the slack to ensure and extra environment, from a thread
// whose own slack is parentSlack (0: as it is), and returns its output lines.
func runHelper(t *testing.T, slack string, parentSlack time.Duration, env ...string) []string {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if parentSlack > 0 {
		// The child inherits the slack of the thread that starts it (this one); put it back
		// afterwards for the tests' other goroutines.
		before := slackOfThisThread()
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(parentSlack.Nanoseconds()), 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(before), 0, 0, 0) }()
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append(env, helperEnv+"="+slack)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func TestEnsureExecutesOnceAndEveryThreadHasTheSlack(t *testing.T) {
	want := strconv.FormatInt((5 * time.Millisecond).Nanoseconds(), 10)
	got := runHelper(t, "5ms", 0)
	expect := []string{"start", "start", "main thread: " + want, "new thread: " + want, "new thread: " + want, "new thread: " + want, "marker kept: false"}
	if strings.Join(got, "\n") != strings.Join(expect, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(expect, "\n"))
	}
}

func TestEnsureLeavesASlackAlreadySet(t *testing.T) {
	// As under systemd's TimerSlackNSec=: nothing to do, no second start.
	got := runHelper(t, "5ms", 5*time.Millisecond)
	if got[0] != "start" || got[1] == "start" || got[1] != "main thread: 5000000" {
		t.Errorf("re-executed although the slack was set, or lost it:\n%s", strings.Join(got, "\n"))
	}
}

func TestEnsureOffChangesNothing(t *testing.T) {
	inherited := strconv.FormatInt(slackOfThisThread(), 10)
	got := runHelper(t, "0s", 0)
	if got[0] != "start" || got[1] != "main thread: "+inherited {
		t.Errorf("off changed the process:\n%s", strings.Join(got, "\n"))
	}
}

func TestEnsureNeverExecutesTwice(t *testing.T) {
	// A kernel that did not keep the slack across execve would otherwise loop.
	got := runHelper(t, "5ms", 0, reexecMarker+"=1")
	if got[0] != "start" || got[1] == "start" || !strings.HasPrefix(got[1], "error: the timer slack was") {
		t.Errorf("want one start and an error:\n%s", strings.Join(got, "\n"))
	}
}
