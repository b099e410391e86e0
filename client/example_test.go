package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dripmesh/drip/client"
)

// brokerAddr is any broker of the mesh (TestMain points it at a test broker).
var brokerAddr = "localhost:7000"

func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := client.Dial(ctx, brokerAddr, client.WithName("example"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	sub, err := c.Subscribe(ctx, `agency = "AP" && priority >= 2 || keywords contains "Italy"`)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	fmt.Println("subscribed:", sub.Predicate())

	sum, err := c.Publish(ctx,
		client.Message{Attrs: client.Attrs{"agency": "AP", "priority": 3}, Payload: []byte("storm warning")},
		client.Message{Attrs: client.Attrs{"agency": "UPI", "priority": 5}, Payload: []byte("not for us")},
		client.Message{Attrs: client.Attrs{"keywords": "Rome, Italy", "score": 0.5}, Payload: []byte("match day")},
	)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("accepted %d, unmatched %d\n", sum.Accepted, sum.Unmatched)

	for range 2 {
		d, err := sub.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %v\n", d.Payload, d.Attrs)
	}
	// Output:
	// subscribed: agency = "AP" && priority >= 2 || keywords contains "Italy"
	// accepted 3, unmatched 1
	// storm warning map[agency:AP priority:3]
	// match day map[keywords:Rome, Italy score:0.5]
}
