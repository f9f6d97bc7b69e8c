// dra-test-driver is the smallest DRA driver a real kubelet accepts: it registers with
// the kubelet of one node, publishes a ResourceSlice of a few devices for that node, and
// prepares and unprepares claims without handing anything to the container runtime (no
// CDI devices). The end-to-end tests run it beside the real node's kubelet
// (kas_dev/cluster/dra_driver.py) so that a pod with a ResourceClaim can start there:
// without a registered driver for every device of its claims, the kubelet refuses to
// run the pod.
//
// The devices are not real. What the kubelet asks of the driver is real: the
// registration over the plugin-registration socket, the gRPC calls
// NodePrepareResources and NodeUnprepareResources on the DRA socket, and the
// ResourceSlice the scheduler allocates from. Each prepare and unprepare is logged on a
// line of its own ("prepared claim NS/NAME ...") for the tests to read.
//
// The kubeletplugin helper of k8s.io/dynamic-resource-allocation does the protocol
// work (both gRPC servers, fetching the claims, the ResourceSlice controller); this
// program supplies what is driver-specific.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

func main() {
	var (
		driverName  = flag.String("driver-name", "dra.kas.local", "the driver's name: in the ResourceSlice and in the claims' allocation results")
		nodeName    = flag.String("node-name", "", "the node this driver serves (its kubelet's node name)")
		kubeconfig  = flag.String("kubeconfig", "", "credentials to read ResourceClaims and write ResourceSlices")
		registryDir = flag.String("registry-dir", "", "the kubelet's plugin registration directory: <kubelet root dir>/plugins_registry")
		pluginDir   = flag.String("plugin-dir", "", "a directory of this driver's own for its DRA socket (dra.sock)")
		devices     = flag.Int("devices", 4, "how many devices to publish")
	)
	klog.InitFlags(nil)
	flag.Parse()
	if *nodeName == "" || *kubeconfig == "" || *registryDir == "" || *pluginDir == "" {
		fmt.Fprintln(os.Stderr, "--node-name, --kubeconfig, --registry-dir and --plugin-dir are required")
		os.Exit(2)
	}
	if err := run(*driverName, *nodeName, *kubeconfig, *registryDir, *pluginDir, *devices); err != nil {
		klog.ErrorS(err, "dra-test-driver failed")
		os.Exit(1)
	}
}

func run(driverName, nodeName, kubeconfig, registryDir, pluginDir string, devices int) error {
	// SIGTERM (the cluster's teardown) cancels the context; the helper then closes its
	// sockets, so the kubelet sees the driver go rather than a dead socket.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	// the helper expects both directories to exist; the kubelet makes the registry
	// directory itself, but the driver may start first
	for _, dir := range []string{registryDir, pluginDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}

	d := &driver{name: driverName, prepared: map[types.UID][]string{}}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(driverName),
		kubeletplugin.NodeName(nodeName),
		kubeletplugin.KubeClient(client),
		// the real node's kubelet runs with a --root-dir of its own, not /var/lib/kubelet
		kubeletplugin.RegistrarDirectoryPath(registryDir),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
		// no device health to report: without this the kubelet would open a health
		// stream the driver could only refuse
		kubeletplugin.HealthService(false),
	)
	if err != nil {
		return fmt.Errorf("start the kubelet plugin: %w", err)
	}
	defer helper.Stop()

	// One pool named after the node, in one slice: the shape of a driver for local
	// devices. The helper's ResourceSlice controller creates it (owned by the Node, so
	// it goes with the node) and puts it back if someone deletes or changes it.
	devs := make([]resourceapi.Device, devices)
	for i := range devs {
		devs[i] = resourceapi.Device{
			Name: fmt.Sprintf("dev-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))},
			},
		}
	}
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{nodeName: {Slices: []resourceslice.Slice{{Devices: devs}}}},
	}); err != nil {
		return fmt.Errorf("publish the ResourceSlice: %w", err)
	}
	klog.InfoS("serving", "driver", driverName, "node", nodeName, "devices", devices,
		"registryDir", registryDir, "pluginDir", pluginDir)
	go reportRegistration(ctx, helper)
	<-ctx.Done()
	klog.InfoS("stopping")
	return nil
}

// reportRegistration logs "registered with the kubelet" once the kubelet has told the
// driver (NotifyRegistrationStatus) that it accepted it, or why it did not: the harness
// waits for that line, as only then will the kubelet send it claims to prepare.
func reportRegistration(ctx context.Context, helper *kubeletplugin.Helper) {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		status := helper.RegistrationStatus()
		if status == nil {
			continue
		}
		if status.PluginRegistered {
			klog.InfoS("registered with the kubelet")
		} else {
			klog.InfoS("the kubelet refused the registration", "error", status.Error)
		}
		return
	}
}

// driver keeps which devices each prepared claim holds: only to log them and to make a
// repeated prepare (the kubelet retries after a restart) answer the same.
type driver struct {
	name     string
	mu       sync.Mutex
	prepared map[types.UID][]string
}

// PrepareResourceClaims is the kubelet's NodePrepareResources, after the helper has
// fetched each claim and checked that it is allocated. A real driver would set its
// devices up here and name them to the runtime through CDI; these devices need nothing,
// so each allocated device is returned without CDI IDs, and the runtime is told nothing.
func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		var result kubeletplugin.PrepareResult
		var names []string
		for _, r := range claim.Status.Allocation.Devices.Results {
			// a claim may hold devices of other drivers too; those are theirs to prepare
			if r.Driver != d.name {
				continue
			}
			result.Devices = append(result.Devices, kubeletplugin.Device{
				Requests:   []string{r.Request},
				PoolName:   r.Pool,
				DeviceName: r.Device,
			})
			names = append(names, r.Pool+"/"+r.Device)
		}
		d.prepared[claim.UID] = names
		out[claim.UID] = result
		klog.InfoS("prepared claim "+claim.Namespace+"/"+claim.Name, "uid", claim.UID,
			"devices", strings.Join(names, ","))
	}
	return out, nil
}

// UnprepareResourceClaims is NodeUnprepareResources, once no pod on the node uses the
// claim any more. Only namespace, name and UID are given (the claim may be gone); an
// unknown claim is not an error, as the call must be idempotent.
func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		klog.InfoS("unprepared claim "+claim.Namespace+"/"+claim.Name, "uid", claim.UID,
			"devices", strings.Join(d.prepared[claim.UID], ","))
		delete(d.prepared, claim.UID)
		out[claim.UID] = nil
	}
	return out, nil
}

// HandleError receives the helper's background errors (publishing the slice, the gRPC
// servers). All are logged; a fatal one ends the process so that the harness sees it
// exit instead of a driver that silently stopped working.
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	klog.ErrorS(err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		klog.Flush()
		os.Exit(1)
	}
}

// WatchHealthStatus is never called (HealthService(false)); the interface requires it.
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
