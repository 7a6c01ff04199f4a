package container

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// ownerLabel marks everything a Launcher creates (image, network, containers) with the host and
// pid of the process that made it. Close removes them; a process killed before Close (a test
// binary stopped by SIGKILL, a CI job cut off) cannot, so New first removes whatever a process
// of this host that no longer exists left behind.
const ownerLabel = "org.tessera-qa.chaos.owner"

// owner is this process's ownerLabel value.
func owner() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid())
}

// ownerGone reports whether the owner named by an ownerLabel value is a process of this host
// that has exited. Anything else (another host, a malformed value, a live process) is kept.
func ownerGone(v string) bool {
	host, pid, ok := strings.Cut(v, "/")
	me, _ := os.Hostname()
	n, err := strconv.Atoi(pid)
	if !ok || host != me || err != nil || n <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(n, 0), syscall.ESRCH)
}

// reapOrphans removes the containers, networks and images whose owner is gone, and returns
// how many it removed. Best effort within 30 s: what it cannot remove is left for the next run.
func reapOrphans(ctx context.Context, cli *testcontainers.DockerClient) int {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	f := make(client.Filters).Add("label", ownerLabel)
	removed := 0
	if cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cs.Items {
			if ownerGone(c.Labels[ownerLabel]) {
				if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err == nil {
					removed++
				}
			}
		}
	}
	if ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range ns.Items {
			if ownerGone(n.Labels[ownerLabel]) {
				if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err == nil {
					removed++
				}
			}
		}
	}
	if is, err := cli.ImageList(ctx, client.ImageListOptions{Filters: f}); err == nil {
		for _, im := range is.Items {
			if ownerGone(im.Labels[ownerLabel]) {
				if _, err := cli.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err == nil {
					removed++
				}
			}
		}
	}
	return removed
}
