// dra-oracle runs upstream's structured allocator on scenarios given as JSON lines, for the
// differential tests of scheduler/dra (tests/unit/dra/test_allocator_oracle.py).
//
// Each input line is one scenario:
//
//	{"node": v1.Node, "slices": [ResourceSlice], "classes": [DeviceClass],
//	 "claims": [ResourceClaim], "allocatedDevices": [["driver","pool","device"], ...]}
//
// and each output line is {"results": [AllocationResult] | null, "error": "..."}: the
// allocation of every claim, null when the node cannot satisfy them, or upstream's error.
// The features are kube-scheduler v1.37.2's defaults (pkg/scheduler/framework/plugins/
// dynamicresources/dynamicresources.go allocatorFeatures with the default gates), so
// structured.NewAllocator picks the variant kube-scheduler runs.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type scenario struct {
	Node             v1.Node                      `json:"node"`
	Slices           []*resourceapi.ResourceSlice `json:"slices"`
	Classes          []*resourceapi.DeviceClass   `json:"classes"`
	Claims           []*resourceapi.ResourceClaim `json:"claims"`
	AllocatedDevices [][3]string                  `json:"allocatedDevices"`
}

type answer struct {
	Results []resourceapi.AllocationResult `json:"results"`
	Error   string                         `json:"error,omitempty"`
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclass"), name)
}

var features = structured.Features{
	AdminAccess:             true,
	PrioritizedList:         true,
	PartitionableDevices:    true,
	DeviceTaints:            true,
	DeviceBindingAndStatus:  true,
	ConsumableCapacity:      true,
	FractionalCapacityRange: true,
}

func run(s scenario, celCache *cel.Cache) answer {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, d := range s.AllocatedDevices {
		state.AllocatedDevices.Insert(structured.MakeDeviceID(d[0], d[1], d[2]))
	}
	classes := classLister{}
	for _, c := range s.Classes {
		classes[c.Name] = c
	}
	ctx := context.Background()
	allocator, err := structured.NewAllocator(ctx, features, state, classes, s.Slices, celCache)
	if err != nil {
		return answer{Error: "new allocator: " + err.Error()}
	}
	results, err := allocator.Allocate(ctx, &s.Node, s.Claims)
	if err != nil {
		return answer{Error: err.Error()}
	}
	return answer{Results: results}
}

func main() {
	celCache := cel.NewCache(10, cel.Features{EnableConsumableCapacity: true})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		var s scenario
		var a answer
		if err := json.Unmarshal(in.Bytes(), &s); err != nil {
			a = answer{Error: "decode scenario: " + err.Error()}
		} else {
			a = run(s, celCache)
		}
		line, err := json.Marshal(a)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		out.Write(line)
		out.WriteByte('\n')
		out.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
